# LOONG_WITH_JEMALLOC: --with-jemalloc=yes|no|auto (default auto): link the
# loong binary with jemalloc (Debian's libjemalloc-dev), whose malloc then
# serves the whole process, SimGrid's activities and flows included: a
# simulation spends about a seventh of its time allocating (docs/install.md
# has the figures). Off under --enable-sanitizers, whose AddressSanitizer
# brings its own allocator. Call after LOONG_ENABLE_SANITIZERS.
# Sets have_jemalloc, jemalloc_summary, JEMALLOC_LIBS.
AC_DEFUN([LOONG_WITH_JEMALLOC], [
  AC_ARG_WITH([jemalloc],
    [AS_HELP_STRING([--with-jemalloc], [link loong with jemalloc's malloc (faster simulations) @<:@default=auto@:>@])],
    [], [with_jemalloc=auto])
  have_jemalloc=no
  JEMALLOC_LIBS=
  jemalloc_summary="disabled (--without-jemalloc): glibc's malloc"
  AS_IF([test "x$enable_sanitizers" = xyes], [
    AS_IF([test "x$with_jemalloc" = xyes],
      [AC_MSG_ERROR([--with-jemalloc and --enable-sanitizers exclude each other: AddressSanitizer replaces malloc])])
    jemalloc_summary="off under --enable-sanitizers (AddressSanitizer's allocator)"
  ], [test "x$with_jemalloc" != xno], [
    PKG_CHECK_MODULES([JEMALLOC], [jemalloc >= 5.0],
      [have_jemalloc=yes
       jemalloc_summary="$($PKG_CONFIG --modversion jemalloc) (the loong binary's malloc)"],
      [jemalloc_summary="not found (install libjemalloc-dev): glibc's malloc, simulations slower"])
    AS_IF([test "x$with_jemalloc" = xyes && test "x$have_jemalloc" != xyes],
      [AC_MSG_ERROR([--with-jemalloc was given but jemalloc is $jemalloc_summary])])
  ])
  AS_IF([test "x$have_jemalloc" != xyes], [JEMALLOC_LIBS=])
  AC_SUBST([JEMALLOC_LIBS])
])
