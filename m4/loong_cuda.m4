# LOONG_WITH_CUDA: --with-cuda=DIR|yes|no|auto (default auto, DIR=/usr/local/cuda).
# Needs nvcc, the CUDA runtime, cuBLAS and NCCL under DIR, and the MPI
# executor (LOONG_WITH_MPI first): the CUDA device is one of its devices.
# Sets have_cuda, cuda_summary, NVCC, CUDA_CFLAGS/LIBS, HAVE_CUDA.
AC_DEFUN([LOONG_WITH_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [build the CUDA + NCCL device from DIR @<:@default=auto, /usr/local/cuda@:>@])],
    [], [with_cuda=auto])
  have_cuda=no
  cuda_summary="disabled (--without-cuda)"
  cuda_dir=/usr/local/cuda
  AS_CASE([$with_cuda], [yes|auto|no], [], [cuda_dir=$with_cuda])
  AS_IF([test "x$with_cuda" != xno], [
    cuda_missing=""
    AS_IF([test -x "$cuda_dir/bin/nvcc"], [], [cuda_missing="nvcc"])
    AS_IF([test -f "$cuda_dir/include/nccl.h" || test -f /usr/include/nccl.h], [], [cuda_missing="$cuda_missing nccl.h"])
    AS_IF([test "x$have_mpi" = xyes], [], [cuda_missing="$cuda_missing the-MPI-executor(Open-MPI+OpenBLAS)"])
    AS_IF([test -z "$cuda_missing"], [
      have_cuda=yes
      NVCC="$cuda_dir/bin/nvcc"
      CUDA_CFLAGS="-I$cuda_dir/include"
      CUDA_LIBS="-L$cuda_dir/lib64 -Wl,-rpath,$cuda_dir/lib64 -lnccl -lcublas -lcudart"
      cuda_summary="$($NVCC --version | sed -n 's/.*release \(@<:@0-9.@:>@*\).*/\1/p') in $cuda_dir, sm_90 + sm_80 (loong exec --device cuda)"
    ], [
      cuda_summary="not found in $cuda_dir (missing:$cuda_missing)"
      AS_IF([test "x$with_cuda" != xauto],
        [AC_MSG_ERROR([--with-cuda was given but $cuda_summary: install CUDA and NCCL or pass --with-cuda=DIR])])
    ])
  ])
  AC_SUBST([NVCC])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AS_IF([test "x$have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA + NCCL device])])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
])
