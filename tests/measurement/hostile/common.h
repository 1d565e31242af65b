/* Shared by the hostile kernels (the test pastes it in place of the #include). Each kernel
   attacks the sandbox; when the attack works it writes the whole output and puts what it got at
   its start (exfiltration through the only channel a kernel has), when it fails it writes
   nothing: the gate rejects both, and the reason (unwritten_output or not) says which. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define KERNEL void stencil(const float *u, const float *a, float *y, const double *coef, int nz, int ny, int nx)

static char got[16384];
static size_t got_length;

static void note(const char *text, size_t length) {
    size_t room = sizeof got - got_length;
    length = length < room ? length : room;
    memcpy(got + got_length, text, length);
    got_length += length;
}

static void exfiltrate(float *y, int nz, int ny, int nx) {
    size_t points = (size_t)nz * ny * nx;
    if (!got_length) return;
    for (size_t i = 0; i < points; i++) y[i] = 1.0f;
    memcpy(y, got, got_length < points * sizeof(float) ? got_length : points * sizeof(float));
}
