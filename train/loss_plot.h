// loss_plot.h: OUT/loss.png, redrawn from OUT/log.csv at every evaluation
// (so a resumed run's plot shows its whole history).
#ifndef LOSS_PLOT_H
#define LOSS_PLOT_H

#include "run_folder.h"
#include "train_options.h"

// Read the log and write OUT/loss.png atomically; a warning, not an error,
// when it cannot be written. o: the run's flags, for the title.
void write_loss_plot(const RunPaths *paths, const TrainOptions *o, long tokens_per_step);
// The plot's title names the run: its folder, the model's shape, how long
// it trains and on what: "loss: out/atlas (4 layers, 4 heads, dim 128,
// context 64; 2000 steps on data/tinyshakespeare.txt)" (the folder's and
// the data's first 60 bytes).
void loss_plot_title(const RunPaths *paths, const TrainOptions *o, char *title, size_t len);

#endif
