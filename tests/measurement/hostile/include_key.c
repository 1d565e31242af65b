/* Compilation is sandboxed too: an #include of the signing key would print it in the error message. */
#include "@KEY@"
#include "common.h"

KERNEL {}
