// loss_plot.h: OUT/loss.png, redrawn from OUT/log.csv at every evaluation
// (so a resumed run's plot shows its whole history).
#ifndef LOSS_PLOT_H
#define LOSS_PLOT_H

#include "run_folder.h"

// Read the log and write OUT/loss.png atomically; a warning, not an error,
// when it cannot be written.
void write_loss_plot(const RunPaths *paths, long tokens_per_step);
// The plot's title: "loss: " and the run's folder (its first 60 bytes).
void loss_plot_title(const RunPaths *paths, char *title, size_t len);

#endif
