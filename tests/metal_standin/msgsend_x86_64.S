// objc_msgSend and objc_msgSend_stret of the stand-in Objective-C runtime (x86-64 System V).
// Each saves every argument register (and %rax, the vector-register count of variadic calls),
// asks standin_objc_lookup for the method of the receiver's class, restores the registers,
// unwinds its own frame and jumps to the method, which so sees exactly the caller's arguments,
// stack arguments (such as a by-value MTLSize) included, and returns straight to the caller.
        .text

        .macro SAVE_ARGS
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        movq    %rsp, %rbp
        .cfi_def_cfa_register %rbp
        subq    $192, %rsp
        movq    %rdi, 0(%rsp)
        movq    %rsi, 8(%rsp)
        movq    %rdx, 16(%rsp)
        movq    %rcx, 24(%rsp)
        movq    %r8, 32(%rsp)
        movq    %r9, 40(%rsp)
        movq    %rax, 48(%rsp)
        movdqu  %xmm0, 64(%rsp)
        movdqu  %xmm1, 80(%rsp)
        movdqu  %xmm2, 96(%rsp)
        movdqu  %xmm3, 112(%rsp)
        movdqu  %xmm4, 128(%rsp)
        movdqu  %xmm5, 144(%rsp)
        movdqu  %xmm6, 160(%rsp)
        movdqu  %xmm7, 176(%rsp)
        .endm

        .macro RESTORE_ARGS_AND_JUMP
        movq    %rax, %r11
        movq    0(%rsp), %rdi
        movq    8(%rsp), %rsi
        movq    16(%rsp), %rdx
        movq    24(%rsp), %rcx
        movq    32(%rsp), %r8
        movq    40(%rsp), %r9
        movq    48(%rsp), %rax
        movdqu  64(%rsp), %xmm0
        movdqu  80(%rsp), %xmm1
        movdqu  96(%rsp), %xmm2
        movdqu  112(%rsp), %xmm3
        movdqu  128(%rsp), %xmm4
        movdqu  144(%rsp), %xmm5
        movdqu  160(%rsp), %xmm6
        movdqu  176(%rsp), %xmm7
        leave
        .cfi_def_cfa %rsp, 8
        jmp     *%r11
        .endm

// id objc_msgSend(id self /* %rdi */, SEL op /* %rsi */, ...)
        .globl  objc_msgSend
        .type   objc_msgSend, @function
objc_msgSend:
        .cfi_startproc
        testq   %rdi, %rdi
        jz      1f
        SAVE_ARGS
        movq    (%rdi), %rdi                    // the receiver's isa; %rsi is the selector
        call    standin_objc_lookup@PLT
        RESTORE_ARGS_AND_JUMP
1:      xorl    %eax, %eax                      // a message to nil returns zero
        xorl    %edx, %edx
        pxor    %xmm0, %xmm0
        pxor    %xmm1, %xmm1
        ret
        .cfi_endproc
        .size   objc_msgSend, .-objc_msgSend

// void objc_msgSend_stret(void* result /* %rdi */, id self /* %rsi */, SEL op /* %rdx */, ...)
        .globl  objc_msgSend_stret
        .type   objc_msgSend_stret, @function
objc_msgSend_stret:
        .cfi_startproc
        testq   %rsi, %rsi
        jz      2f
        SAVE_ARGS
        movq    (%rsi), %rdi
        movq    %rdx, %rsi
        call    standin_objc_lookup@PLT
        RESTORE_ARGS_AND_JUMP
2:      movq    %rdi, %rax                      // nil: the result is left as it was
        ret
        .cfi_endproc
        .size   objc_msgSend_stret, .-objc_msgSend_stret

        .section .note.GNU-stack,"",@progbits
