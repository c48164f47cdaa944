# LOONG_WITH_PROTOBUF_C: --with-protobuf-c=yes|no|auto (default auto), for
# `loong dag --format chakra` (Chakra execution traces). Needs the library
# (pkg-config libprotobuf-c) and the code generator protoc-c.
# Sets have_protobuf_c, protobuf_c_summary, PROTOBUF_C_CFLAGS/LIBS, PROTOC_C,
# HAVE_PROTOBUF_C.
AC_DEFUN([LOONG_WITH_PROTOBUF_C], [
  AC_ARG_WITH([protobuf-c],
    [AS_HELP_STRING([--with-protobuf-c], [write Chakra execution traces (loong dag --format chakra) @<:@default=auto@:>@])],
    [], [with_protobuf_c=auto])
  have_protobuf_c=no
  protobuf_c_summary="disabled (--without-protobuf-c)"
  AS_IF([test "x$with_protobuf_c" != xno], [
    AC_PATH_PROG([PROTOC_C], [protoc-c])
    PKG_CHECK_MODULES([PROTOBUF_C], [libprotobuf-c >= 1.0],
      [AS_IF([test -n "$PROTOC_C"],
        [have_protobuf_c=yes
         protobuf_c_summary="$($PKG_CONFIG --modversion libprotobuf-c) (loong dag --format chakra)"],
        [protobuf_c_summary="protoc-c not found (install protobuf-c-compiler)"])],
      [protobuf_c_summary="not found (install libprotobuf-c-dev protobuf-c-compiler)"])
    AS_IF([test "x$with_protobuf_c" = xyes && test "x$have_protobuf_c" != xyes],
      [AC_MSG_ERROR([--with-protobuf-c was given but $protobuf_c_summary])])
  ])
  AC_PATH_PROG([PROTOC], [protoc])
  AS_IF([test "x$have_protobuf_c" = xyes], [AC_DEFINE([HAVE_PROTOBUF_C], [1], [Chakra trace writer (protobuf-c)])])
  AM_CONDITIONAL([HAVE_PROTOBUF_C], [test "x$have_protobuf_c" = xyes])
])
