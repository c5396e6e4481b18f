/* nop.cl — the empty kernel: bench's LAUNCH_EMPTY runs it on a kind's grid in place of the kind, so
 * that what a launch costs apart from its work can be timed. */

kernel void nop(void) {}
