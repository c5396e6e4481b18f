/* vbench.h — `clgemma vbench`: the image figures of issue 23 (docs/design-vision.md 6) on one engine: encode time
 * per image alone and -b at once, time to first token of a 1-image prompt fresh and cached, -b such prompts in one
 * step; a table on stdout, JSON lines with -o. */
#ifndef CLGEMMA_CLI_VBENCH_H
#define CLGEMMA_CLI_VBENCH_H

#include "options.h"

int cmd_vbench(const cli_args *a);

#endif
