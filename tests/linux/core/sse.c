/* The program's SSE registers survive system calls: xmm0..xmm15 are set to patterns, several
 * calls are made, and each register is compared. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

int main(void) {
    unsigned char before[16][16], after[16][16];
    for (int r = 0; r < 16; r++)
        for (int i = 0; i < 16; i++) before[r][i] = (unsigned char)(r * 16 + i + 1);
    long pid = 0;
    __asm__ volatile(
        "movdqu 0(%1), %%xmm0\n movdqu 16(%1), %%xmm1\n movdqu 32(%1), %%xmm2\n movdqu 48(%1), %%xmm3\n"
        "movdqu 64(%1), %%xmm4\n movdqu 80(%1), %%xmm5\n movdqu 96(%1), %%xmm6\n movdqu 112(%1), %%xmm7\n"
        "movdqu 128(%1), %%xmm8\n movdqu 144(%1), %%xmm9\n movdqu 160(%1), %%xmm10\n movdqu 176(%1), %%xmm11\n"
        "movdqu 192(%1), %%xmm12\n movdqu 208(%1), %%xmm13\n movdqu 224(%1), %%xmm14\n movdqu 240(%1), %%xmm15\n"
        "mov $39, %%eax\n syscall\n"              /* getpid */
        "mov $24, %%eax\n syscall\n"              /* sched_yield */
        "mov $12, %%eax\n xor %%edi, %%edi\n syscall\n" /* brk(0) */
        "mov $39, %%eax\n syscall\n mov %%rax, %0\n"
        "movdqu %%xmm0, 0(%2)\n movdqu %%xmm1, 16(%2)\n movdqu %%xmm2, 32(%2)\n movdqu %%xmm3, 48(%2)\n"
        "movdqu %%xmm4, 64(%2)\n movdqu %%xmm5, 80(%2)\n movdqu %%xmm6, 96(%2)\n movdqu %%xmm7, 112(%2)\n"
        "movdqu %%xmm8, 128(%2)\n movdqu %%xmm9, 144(%2)\n movdqu %%xmm10, 160(%2)\n movdqu %%xmm11, 176(%2)\n"
        "movdqu %%xmm12, 192(%2)\n movdqu %%xmm13, 208(%2)\n movdqu %%xmm14, 224(%2)\n movdqu %%xmm15, 240(%2)\n"
        : "=r"(pid)
        : "r"(before), "r"(after)
        : "rax", "rcx", "rdi", "r11", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
          "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    int same = memcmp(before, after, sizeof before) == 0;
    printf("sse: xmm0..xmm15 %s across system calls (pid %s)\n", same ? "preserved" : "CHANGED",
           pid == getpid() ? "consistent" : "WRONG");
    return same ? 0 : 1;
}
