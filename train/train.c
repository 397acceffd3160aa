// train.c: bin/train, the training program: set a run up, then step, log,
// evaluate and save until done. See README.md for the flags.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/util.h"
#include "progress.h"
#include "run.h"

// ---- Ctrl-C / SIGTERM: the first finishes the step and saves, a second
// exits at once (checkpoint writes are atomic, so nothing tears).

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    if (stop_requested) _exit(128 + sig);
    stop_requested = sig;
}

static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

// ---- the end of a run: saved to continue later, or done

static int finish(Run *run, int interrupted, float last_val, double run_seconds,
                  double train_seconds, long steps_run, int live) {
    const TrainOptions *o = &run->o;
    if (interrupted || run->opt.step < o->iters) {
        run_save(run);
        printf("%s%s at step %ld: saved %s; continue with --resume\n", live ? "\n" : "",
               interrupted ? "interrupted" : "stopped", run->opt.step, run->paths.model_path);
        return interrupted ? 128 + interrupted : 0; // 130 SIGINT, 143 SIGTERM
    }
    if (last_val != last_val) { // NaN: nothing ran (a resumed run already complete)
        float train_loss = evaluate(&run->model, run->train, run->B, run->T, o->eval_batches,
                                    &run->batch, run->micro_rows);
        last_val = evaluate(&run->model, run->val, run->B, run->T, o->eval_batches, &run->batch,
                            run->micro_rows);
        printf("step %ld: train loss %.4f, val loss %.4f\n", run->opt.step, train_loss, last_val);
    }
    printf("done: %ld iterations, %.1f s wall (%.1f ms/iter training); final val loss %.4f\n",
           run->opt.step, run_seconds, steps_run > 0 ? 1e3 * train_seconds / steps_run : 0.0,
           last_val);
    if (run->procs > 1)
        printf("gradient sums across %d processes: %.2f ms/iter\n", run->procs,
               steps_run > 0 ? 1e3 * run->reduce_seconds / steps_run : 0.0);
    return 0;
}

int main(int argc, char **argv) {
    Run run;
    run_start(&run, argc, argv);
    catch_stop_signals();
    const TrainOptions *o = &run.o;
    int tokens_per_step = run.B * run.T, live = isatty(STDOUT_FILENO);
    double run_start_time = now_seconds(), train_seconds = 0.0;
    ProgressWindow window = {0};
    float last_val = 0.0f / 0.0f, ms_per_iter = 0.0f, tokens_per_s = 0.0f;
    long steps_run = 0;
    while (run.opt.step < o->iters && !run_should_stop(&run, stop_requested) &&
           !(o->stop_at > 0 && run.opt.step >= o->stop_at)) {
        double t0 = now_seconds();
        float lr = lr_at(&run.adamw, run.opt.step);
        float loss = train_step(&run, lr, stop_requested); // forward, backward, clip, AdamW update
        double dt = now_seconds() - t0;
        train_seconds += dt;
        steps_run++;
        progress_add_step(&window, dt, loss);
        long step = run.opt.step;

        if (live) print_live_progress(&window, step, o->iters, loss, lr, tokens_per_step);
        if (o->heatmaps_every > 0 && step % o->heatmaps_every == 0 && run.rank == 0)
            write_heatmaps(&run.model, &run.probe, o->out, step);
        int is_log = step % o->log_every == 0, is_eval = step % o->eval_every == 0 || step == o->iters;
        if (is_log || is_eval)
            ms_per_iter = log_window(&window, run.log, step, o->iters, lr, tokens_per_step,
                                     !live && is_log, !is_eval, &tokens_per_s);
        if (is_eval) {
            float train_loss = evaluate(&run.model, run.train, run.B, run.T, o->eval_batches,
                                        &run.batch, run.micro_rows);
            last_val = evaluate(&run.model, run.val, run.B, run.T, o->eval_batches, &run.batch,
                                run.micro_rows);
            run_save(&run);
            log_eval_row(run.log, step, train_loss, last_val, lr, ms_per_iter, tokens_per_s);
            printf("%sstep %ld: train loss %.4f, val loss %.4f (saved %s)\n", live ? "\n" : "",
                   step, train_loss, last_val, run.paths.model_path);
            if (run.rank == 0) // the others' output goes nowhere
                print_sample(&run.sample_cache, &run.sampler, &run.corpus.vocab, o->sample_chars);
        }
        if (is_log || is_eval) {
            fflush(run.log);
            fflush(stdout);
        }
    }
    int interrupted = stop_requested ? stop_requested : run.stop_agreed ? SIGTERM : 0;
    int exit_code = finish(&run, interrupted, last_val, now_seconds() - run_start_time,
                           train_seconds, steps_run, live);
    run_free(&run);
    return exit_code;
}
