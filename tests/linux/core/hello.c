/* The smallest Linux program test: musl's start-up (auxv, TLS via arch_prctl, stdio) and
 * printf through writev, then an exit status. */
#include <stdio.h>

int main(int argc, char **argv, char **envp) {
    printf("hello: argc=%d argv[0]=%s argv[1]=%s env0=%s\n", argc, argv[0],
           argc > 1 ? argv[1] : "-", envp[0] ? envp[0] : "-");
    return 7;
}
