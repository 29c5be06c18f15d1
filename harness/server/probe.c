/* The smallest riscv64 program: used to ask QEMU whether it accepts a -cpu property. */
int main(void) { return 0; }
