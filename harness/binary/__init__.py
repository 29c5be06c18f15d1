"""Reading a built binary without running it: an ELF's program headers and symbols and the one rule
for reading a GCC clone's name as the function it copies (``elf``), a kernel server's DWARF line
table (``dwarf``), and the assembler name of a vector instruction word (``rvvnames``)."""
