# LOONG_WITH_MPI: --with-mpi=yes|no|auto (default auto). Open MPI through
# pkg-config (ompi-c), plus a CBLAS for the CPU kernels of the executor.
# Sets have_mpi, mpi_summary, MPI_CFLAGS/LIBS, BLAS_CFLAGS/LIBS, HAVE_MPI.
AC_DEFUN([LOONG_WITH_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi], [build the MPI executor (loong exec) @<:@default=auto@:>@])],
    [], [with_mpi=auto])
  have_mpi=no
  mpi_summary="disabled (--without-mpi)"
  AS_IF([test "x$with_mpi" != xno], [
    PKG_CHECK_MODULES([MPI], [ompi-c],
      [PKG_CHECK_MODULES([BLAS], [openblas],
         [have_mpi=yes
          mpi_summary="$($PKG_CONFIG --modversion ompi-c), OpenBLAS $($PKG_CONFIG --modversion openblas) (loong exec)"],
         [mpi_summary="OpenBLAS not found (install libopenblas-dev)"])],
      [mpi_summary="not found (install libopenmpi-dev openmpi-bin)"])
    AS_IF([test "x$with_mpi" = xyes && test "x$have_mpi" != xyes],
      [AC_MSG_ERROR([--with-mpi was given but $mpi_summary])])
  ])
  AS_IF([test "x$have_mpi" = xyes], [
    AC_PATH_PROG([MPIRUN], [mpirun], [mpirun])
    AC_DEFINE([HAVE_MPI], [1], [MPI executor])])
  AM_CONDITIONAL([HAVE_MPI], [test "x$have_mpi" = xyes])
])
