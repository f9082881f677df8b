/*
 * model_validate.h - the timing model against every published figure it
 * can speak to (vip_model --validate; spec-notes/timing-model.md).
 */
#ifndef MODEL_VALIDATE_H
#define MODEL_VALIDATE_H

#include <stdbool.h>
#include <stdio.h>

/*
 * Print the table: one line per figure of shared/reference (what it is,
 * its source, the published value, the model's prediction, the paced
 * emulation's measurement read from results_dir (NULL or a missing file:
 * "-"), the error and the tolerance with its reason), then
 * `validated N figures, M outside tolerance`. Profiles `sbus` and `pci`
 * are loaded from profile_dir. Returns M, or -1 when a profile cannot be
 * loaded (the reason on stderr).
 */
int model_validate(FILE *out, const char *profile_dir, const char *results_dir, bool markdown);

#endif
