/* The hardware counters of a kernel server on a board (harness/cost/measure/board_counters.py): opens the
 * user-mode cycle and retired-instruction counters of process PID with perf_event_open, then for
 * each line read on stdin prints "cycles instret" (the counts so far).  Current kernels disable
 * user-mode rdcycle; perf_event_open needs kernel.perf_event_paranoid <= 2 for one's own processes
 * (or CAP_PERFMON).  When the counters cannot be opened it prints "error=<what> paranoid=<value>"
 * and exits 3. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/perf_event.h>

static int open_counter(pid_t pid, uint64_t config) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_HARDWARE;
    a.size = sizeof a;
    a.config = config;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    return (int)syscall(__NR_perf_event_open, &a, pid, -1, -1, 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PID\n", argv[0]);
        return 2;
    }
    pid_t pid = (pid_t)atoi(argv[1]);
    int cyc = open_counter(pid, PERF_COUNT_HW_CPU_CYCLES);
    int err = errno;
    int ins = cyc >= 0 ? open_counter(pid, PERF_COUNT_HW_INSTRUCTIONS) : -1;
    if (cyc < 0 || ins < 0) {
        if (cyc >= 0) err = errno;
        char paranoid[32] = "unknown";
        FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
        if (f) {
            if (fgets(paranoid, sizeof paranoid, f)) paranoid[strcspn(paranoid, "\n")] = 0;
            fclose(f);
        }
        printf("error=%s paranoid=%s\n", strerror(err), paranoid);
        return 3;
    }
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        uint64_t c = 0, i = 0;
        if (read(cyc, &c, sizeof c) != sizeof c || read(ins, &i, sizeof i) != sizeof i) {
            printf("error=read: %s paranoid=-\n", strerror(errno));
            return 3;
        }
        printf("%llu %llu\n", (unsigned long long)c, (unsigned long long)i);
        fflush(stdout);
    }
    return 0;
}
