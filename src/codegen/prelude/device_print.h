/** \file device_print.h
 * One line of `device_print`: the single definition of its format, compiled into the interp and
 * pasted into the cpu, metal-sim and CUDA preludes (after defining METILE_PRINT_FN, e.g.
 * `__device__ static` for CUDA). The user's text reaches this function as data (`head`: the
 * source location "file:line: ", `label`: " prefix" and " (operand k)"), never as part of a
 * format string, so nothing in it can change what is printed or run. One printf call per line
 * keeps concurrent lines whole. Format:
 *   HEADpid (x, y, z)[ idx (i[, j])]LABEL[ VALUE]
 * rank: -1 no value, 0 scalar, 1 or 2 the tile's rank; kind: 0 integer (ival), 1 float (fval).
 */
#ifndef METILE_DEVICE_PRINT_H
#define METILE_DEVICE_PRINT_H

#ifndef METILE_PRINT_FN
#define METILE_PRINT_FN static inline
#endif
#ifndef METILE_PRINT_FLUSH
#define METILE_PRINT_FLUSH()
#endif

METILE_PRINT_FN void metile_device_print(const char* head, const char* label, unsigned px,
                                         unsigned py, unsigned pz, int rank, long long i,
                                         long long j, int kind, long long ival, double fval) {
  if (rank < 0) {
    printf("%spid (%u, %u, %u)%s\n", head, px, py, pz, label);
  } else if (kind == 1) {
    if (rank == 0) printf("%spid (%u, %u, %u)%s %.9g\n", head, px, py, pz, label, fval);
    else if (rank == 1) printf("%spid (%u, %u, %u) idx (%lld)%s %.9g\n", head, px, py, pz, i, label, fval);
    else printf("%spid (%u, %u, %u) idx (%lld, %lld)%s %.9g\n", head, px, py, pz, i, j, label, fval);
  } else {
    if (rank == 0) printf("%spid (%u, %u, %u)%s %lld\n", head, px, py, pz, label, ival);
    else if (rank == 1) printf("%spid (%u, %u, %u) idx (%lld)%s %lld\n", head, px, py, pz, i, label, ival);
    else printf("%spid (%u, %u, %u) idx (%lld, %lld)%s %lld\n", head, px, py, pz, i, j, label, ival);
  }
  METILE_PRINT_FLUSH();
}

#endif
