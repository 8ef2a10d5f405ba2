// For compile checks against a CPU-only build of PyTorch, which does not ship this generated header (a CUDA build
// does, with the same one line): cudasrc.compile_check puts this folder last on the include path.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
