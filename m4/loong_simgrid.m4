# LOONG_WITH_SIMGRID: --with-simgrid=yes|no|auto (default auto).
# Sets have_simgrid, simgrid_summary, SIMGRID_CFLAGS/LIBS, HAVE_SIMGRID.
AC_DEFUN([LOONG_WITH_SIMGRID], [
  AC_ARG_WITH([simgrid],
    [AS_HELP_STRING([--with-simgrid], [build the SimGrid backend (loong sim) @<:@default=auto@:>@])],
    [], [with_simgrid=auto])
  have_simgrid=no
  simgrid_summary="disabled (--without-simgrid)"
  AS_IF([test "x$with_simgrid" != xno], [
    PKG_CHECK_MODULES([SIMGRID], [simgrid >= 3.32],
      [have_simgrid=yes
       simgrid_summary="$($PKG_CONFIG --modversion simgrid) (loong sim)"],
      [simgrid_summary="not found (install libsimgrid-dev)"
       AS_IF([test "x$with_simgrid" = xyes],
         [AC_MSG_ERROR([--with-simgrid was given but SimGrid >= 3.32 was not found: install the Debian package libsimgrid-dev])])])
  ])
  AS_IF([test "x$have_simgrid" = xyes], [AC_DEFINE([HAVE_SIMGRID], [1], [SimGrid backend])])
  AM_CONDITIONAL([HAVE_SIMGRID], [test "x$have_simgrid" = xyes])
])
