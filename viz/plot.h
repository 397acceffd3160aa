// plot.h: the loss plot of a training run (OUT/loss.png), drawn with the
// heatmaps' image type, fonts and PNG writer: the title (it names the run:
// its folder, shape and data) in the label font, Unifont when installed; numbers and legend in
// the built-in font, as the heatmaps' titles and numbers.
//
// Layout (PLOT_W x PLOT_H pixels): a title line, a legend line, the plot
// area with the loss axis on the left and the learning-rate axis on the
// right, and under it two rows of tick labels: the step and the tokens
// seen (step x tokens per step). Training loss is a blue line, validation
// loss an orange line with a dot at each evaluation, the best validation
// loss a red ring with its value written beside it, and the learning rate
// a thin grey line against the right axis.
#ifndef VIZ_PLOT_H
#define VIZ_PLOT_H

#include <stdint.h>

#include "heatmap.h"

#define PLOT_W 900
#define PLOT_H 520
// The plot area's frame, in pixels.
#define PLOT_X0 70
#define PLOT_Y0 60
#define PLOT_X1 (PLOT_W - 80)
#define PLOT_Y1 (PLOT_H - 70)

extern const uint8_t plot_train_rgb[3], plot_val_rgb[3], plot_best_rgb[3], plot_lr_rgb[3];

typedef struct {
    const long *train_steps;  // (num_train) steps of the training-loss points
    const float *train_loss;
    const float *lr;          // (num_train) learning rate at those steps
    int num_train;
    const long *val_steps;    // (num_val) steps of the evaluations
    const float *val_loss;
    int num_val;
    long tokens_per_step;     // B x T
    const char *title;
} LossHistory;

// Where the plot puts (step, loss) and (step, lr), for a history (the axes'
// ranges follow from it): pixel coordinates, and the best evaluation's index
// (-1 if none).
typedef struct {
    double step_max, loss_min, loss_max, lr_max;
    int best;
} PlotAxes;
void plot_axes(const LossHistory *h, PlotAxes *axes);
int plot_x(const PlotAxes *axes, double step);
int plot_y_loss(const PlotAxes *axes, double loss);
int plot_y_lr(const PlotAxes *axes, double lr);

// Where the title's character `index` (in code points) is drawn: its
// top-left pixel and scale. The title is in the label font (unifont.h),
// the numbers and legend in the built-in font, as on the heatmaps; the
// built-in font draws it at twice its size, or at its own when the title
// would not fit so.
void plot_title_position(const char *title, int index, int *x, int *y, int *scale);
// How many of the title's characters the label font draws as a box (a
// byte that is not UTF-8 is one).
int plot_title_boxes(const char *title);

// Draw into a new image (PLOT_W x PLOT_H); the caller frees it.
void loss_plot_render(Image *image, const LossHistory *h);
// Draw and write atomically to path. Returns 0 with a message on error.
int loss_plot_write(const char *path, const LossHistory *h, char *err, size_t err_len);

#endif
