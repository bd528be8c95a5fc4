// Room on the stack (note "stack-room"). libtorch's kernels and sentencepiece's encoder run deep on whatever
// stack they are given: under `ulimit -s 128` train and eval died of SIGSEGV in their first step (libtorch's
// cos kernel, 22 frames below main), and prepare under `ulimit -s 64` in an encoder thread (glibc gives every
// new thread a stack the size of RLIMIT_STACK as the process started).
#pragma once

namespace loco {

// Raises the soft stack limit to 8 MiB where it is lower and the hard limit allows (the main thread's stack
// grows up to the limit in force when it grows), and makes 8 MiB the stack of threads started from now on where
// it was less. Throws Error naming `ulimit -s` when the hard limit keeps the stack under 1 MiB, which loco does
// not run in (160 KiB was the least measured to train a tiny model; deeper models take more).
void make_room_on_the_stack();

}  // namespace loco
