// train.c: bin/train, the training program: set a run up, then step, log,
// evaluate and save until done. See README.md for the flags.
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/util.h"
#include "distributed.h"
#include "progress.h"
#include "loss_plot.h"
#include "recipes.h"
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

// Before --iters is fixed (the plan with the cosine, the decay's start with
// wsd), the saved flags keep the budget as the minutes left, so that
// --resume times and plans for them.
static void save_budget_left(Run *run, const TimeBudget *budget) {
    if (!(budget->budget_seconds > 0) || budget->iters_fixed) return;
    run->o.minutes = time_budget_minutes_left(budget, now_seconds());
    free(run->options_json);
    run->options_json = train_options_to_json(run->table);
}

static int finish(Run *run, const TimeBudget *budget, int interrupted, float last_val,
                  double run_seconds, double train_seconds, long steps_run, int live) {
    TrainOptions *o = &run->o;
    if (interrupted || run->opt.step < o->iters) {
        save_budget_left(run, budget);
        run_save(run, NAN, NAN);
        // A batch system's SIGTERM reaches every process, not only mpirun;
        // were another rank to exit first, mpirun would end the job and kill
        // rank 0 mid-save. So every rank waits for rank 0's save.
        if (run->procs > 1) distributed_broadcast(&run->opt.step, sizeof run->opt.step);
        printf("%s%s at step %ld: saved %s; continue with --resume", live ? "\n" : "",
               interrupted ? "interrupted" : "stopped", run->opt.step, run->paths.model_path);
        if (budget->budget_seconds > 0 && !budget->iters_fixed)
            printf(" (before the plan: %.3g minutes of the time budget left)", (double)o->minutes);
        printf("\n");
        return interrupted ? 128 + interrupted : 0; // 130 SIGINT, 143 SIGTERM
    }
    if (last_val != last_val) { // NaN: nothing ran (a resumed run already complete)
        float train_loss = evaluate(&run->model, run->train, run->B, run->T, o->eval_batches,
                                    &run->batch, run->micro_rows);
        last_val = evaluate(&run->model, run->val, run->B, run->T, o->eval_batches, &run->batch,
                            run->micro_rows);
        printf("step %ld: train loss %.4f, val loss %.4f\n", run->opt.step, train_loss, last_val);
    }
    // the model file holds the best model evaluated: its loss, and its step
    // when it is not the last (or the average's, with --ema)
    int kept_earlier = run->best.step >= 0 && (run->best.step != run->opt.step || run->best.average);
    printf("done: %ld iterations, %.1f s wall (%.1f ms/iter training); final val loss %.4f",
           run->opt.step, run_seconds, steps_run > 0 ? 1e3 * train_seconds / steps_run : 0.0,
           kept_earlier ? (double)run->best.val_loss : (double)last_val);
    if (kept_earlier)
        printf(", the %s of step %ld in %s (the best evaluated; the last step's: %.4f)",
               run->best.average ? "average of the weights" : "model", run->best.step,
               run->paths.model_path, (double)last_val);
    printf("\n");
    if (run->procs > 1)
        printf("gradient sums across %d processes: %.2f ms/iter\n", run->procs,
               steps_run > 0 ? 1e3 * run->reduce_seconds / steps_run : 0.0);
    if (budget->budget_seconds > 0 && budget->iters_fixed) {
        char decay[sizeof run->replans + 32] = "";
        if (run->adamw.schedule == SCHEDULE_WSD)
            snprintf(decay, sizeof decay, " --decay-from %d", run->adamw.decay_from);
        if (run->adamw.replans)
            snprintf(decay, sizeof decay, " --replans %s", run->replans);
        printf("time budget %.3g minutes, used %.1f%%; to repeat this run step for step: --iters "
               "%d%s (with --eval-every %d for the same evaluations)\n",
               budget->budget_seconds / 60.0, 100.0 * run_seconds / budget->budget_seconds, o->iters,
               decay, o->eval_every);
    }
    return 0;
}

// Evaluate both splits, log, save, redraw OUT/loss.png and print a sample.
// Returns the validation loss.
static float evaluate_and_save(Run *run, long step, float lr, float ms_per_iter,
                               float tokens_per_s, int live) {
    const TrainOptions *o = &run->o;
    float train_loss = evaluate(&run->model, run->train, run->B, run->T, o->eval_batches,
                                &run->batch, run->micro_rows);
    float val_loss = evaluate(&run->model, run->val, run->B, run->T, o->eval_batches, &run->batch,
                              run->micro_rows);
    // The row before the save that makes this step done: a kill between
    // the two leaves the row of a step the checkpoint has not reached,
    // which --resume drops (open_log) and writes again; the other way
    // round the row would be lost for good.
    log_eval_row(run->log.file, step, train_loss, val_loss, lr, ms_per_iter, tokens_per_s);
    run_log_flush(&run->log);
    float average_val = run_evaluate_average(run); // NAN without --ema
    Kept kept = run_save(run, val_loss, average_val);
    char average[96] = "";
    if (average_val == average_val)
        snprintf(average, sizeof average, ", the average's (--ema %g) %.4f", (double)o->ema,
                 (double)average_val);
    if (kept != KEPT_EARLIER)
        printf("%sstep %ld: train loss %.4f, val loss %.4f%s (saved %s%s)\n", live ? "\n" : "",
               step, train_loss, val_loss, average, run->paths.model_path,
               kept == KEPT_AVERAGE ? ": the average" : average_val == average_val ? ": the step's" : "");
    else
        printf("%sstep %ld: train loss %.4f, val loss %.4f%s (not below step %ld's %.4f%s: %s "
               "keeps that model)\n", live ? "\n" : "", step, train_loss, val_loss, average,
               run->best.step, (double)run->best.val_loss, run->best.average ? ", the average's" : "",
               run->paths.model_path);
    if (run->rank == 0) { // the others' output goes nowhere
        write_loss_plot(&run->paths, o, run->B * run->T);
        print_sample(&run->sample_cache, &run->sampler, &run->corpus.vocab, o->sample_chars);
    }
    return val_loss;
}

// --heatmaps-every: the snapshot of this step, timed for the --minutes plan.
static void take_snapshot(Run *run, TimeBudget *budget, long step) {
    if (run->rank != 0) return;
    double t0 = now_seconds();
    write_heatmaps(&run->model, &run->probe, run->o.out, step);
    time_budget_snapshot(budget, now_seconds() - t0);
}

// An evaluation with its save, loss plot and sample, timed for the plan.
static float timed_evaluation(Run *run, TimeBudget *budget, long step, float lr, float ms_per_iter,
                              float tokens_per_s, int live) {
    double t0 = now_seconds();
    save_budget_left(run, budget); // a save before --iters is fixed keeps the minutes left
    float val_loss = evaluate_and_save(run, step, lr, ms_per_iter, tokens_per_s, live);
    time_budget_evaluation(budget, now_seconds() - t0);
    return val_loss;
}

// --minutes: until the plan, --iters is unknown (the warmup does not need
// it) and evaluations wait; then one evaluation (and with --heatmaps-every
// one snapshot) is timed and the plan fixes --eval-every and, with the
// cosine, --iters, saved with the run's flags. wsd fixes --iters later
// (start_decay). Returns the evaluation's validation loss.
static float plan_time_budget(Run *run, TimeBudget *budget, float lr, float ms_per_iter,
                              float tokens_per_s, int live) {
    TrainOptions *o = &run->o;
    long step = run->opt.step;
    double t0 = now_seconds();
    float val_loss = timed_evaluation(run, budget, step, lr, ms_per_iter, tokens_per_s, live);
    if (o->heatmaps_every > 0 && !budget->snapshots) take_snapshot(run, budget, step);
    double now = now_seconds();
    int eval_every_given = option_given(run->table, NUM_TRAIN_OPTIONS, "--eval-every") ? o->eval_every : 0;
    int iters;
    time_budget_plan(budget, step, now, eval_every_given, o->heatmaps_every, &iters, &o->eval_every);
    // Processes time themselves differently: rank 0's plan is every one's.
    int plan[2] = {iters, o->eval_every};
    distributed_broadcast(plan, sizeof plan);
    o->eval_every = plan[1];
    budget->planned = 1;
    budget->planned_at = now;
    int wsd = run->adamw.schedule == SCHEDULE_WSD;
    if (!wsd) {
        o->iters = run->adamw.iters = plan[0];
        budget->iters_fixed = 1;
        o->minutes = 0; // planned: the saved flags hold --iters, not the budget
        free(run->options_json);
        run->options_json = train_options_to_json(run->table);
    }
    char iters_text[128];
    if (wsd)
        snprintf(iters_text, sizeof iters_text, "--eval-every %d, about %d steps (the decay's start "
                 "chosen later from the time left)", o->eval_every, plan[0]);
    else
        snprintf(iters_text, sizeof iters_text, "--iters %d --eval-every %d (add --iters %d to "
                 "repeat this run exactly)", o->iters, o->eval_every, o->iters);
    char capped[128] = "";
    if (budget->max_steps > 0 && plan[0] >= (long)budget->max_steps)
        snprintf(capped, sizeof capped, ", capped at --max-passes %g over the training text",
                 (double)o->max_passes);
    printf("time budget %.3g minutes: %.1f ms per step over the first %ld, an evaluation and "
           "save %.2f s%s; so %s%s\n",
           budget->budget_seconds / 60.0,
           1e3 * (budget->timed_steps ? budget->timed_seconds / budget->timed_steps
                                      : budget->first_step_seconds),
           step, now - t0, o->heatmaps_every > 0 ? " with a snapshot" : "", iters_text, capped);
    char too_short[512];
    if (!time_budget_plan_fits(budget, step, plan[0], o->warmup, now, too_short, sizeof too_short))
        printf("note: %s\n", too_short);
    if (plan[0] >= BUDGET_MAX_ITERS)
        printf("note: the budget holds more steps than --iters takes (%.0f at most), so the run "
               "ends after those, before its time is up\n", BUDGET_MAX_ITERS);
    fflush(stdout);
    return val_loss;
}

// wsd with --minutes: the decay starts after this step and ends at `iters`;
// the saved flags hold both from now on.
static void start_decay(Run *run, TimeBudget *budget, int iters, int live) {
    TrainOptions *o = &run->o;
    long step = run->opt.step;
    double left = budget->budget_seconds - (now_seconds() - budget->start);
    o->iters = run->adamw.iters = iters;
    o->decay_from = run->adamw.decay_from = (int)step;
    budget->iters_fixed = 1;
    o->minutes = 0;
    free(run->options_json);
    run->options_json = train_options_to_json(run->table);
    printf("%stime budget: %.1f s left at step %ld, so the decay runs from here to step %d (add "
           "--iters %d --decay-from %ld to repeat this run exactly)\n",
           live ? "\n" : "", left, step, iters, iters, step);
    fflush(stdout);
}

// The cosine with --minutes, after its plan: at the recent speed the run
// would miss its aim, so it goes on from the rate reached towards a new
// end (time_budget_replan); the saved flags hold the re-plans (--replans).
static void replan_cosine(Run *run, TimeBudget *budget, int live) {
    TrainOptions *o = &run->o;
    long step = run->opt.step;
    int decide[2] = {0, 0};
    // not once the last step is taken (schedule_replan refuses the warmup)
    if (step + 1 < run->adamw.iters)
        decide[0] = time_budget_replan(budget, step, now_seconds(), o->eval_every,
                                       o->heatmaps_every, run->adamw.iters, &decide[1]);
    if (run->procs > 1) distributed_broadcast(decide, sizeof decide);
    if (!decide[0]) return;
    int before = run->adamw.iters;
    if (!schedule_replan(&run->adamw, step, decide[1])) return; // full, or in the warmup: planned on
    o->iters = run->adamw.iters;
    schedule_format_replans(&run->adamw, run->replans, sizeof run->replans);
    o->replans = run->replans;
    free(run->options_json);
    run->options_json = train_options_to_json(run->table);
    double left = budget->budget_seconds - (now_seconds() - budget->start);
    printf("%stime budget: %.1f s left at step %ld, so the cosine ends at step %d, not %d (add "
           "--iters %d --replans %s to repeat this run exactly)\n",
           live ? "\n" : "", left, step, o->iters, before, o->iters, run->replans);
    fflush(stdout);
}

int main(int argc, char **argv) {
    double run_start_time = now_seconds(), train_seconds = 0.0;
    Run run;
    run_start(&run, argc, argv);
    catch_stop_signals();
    TrainOptions *o = &run.o;
    TimeBudget budget;
    // o->minutes of a resumed run: the minutes left when it stopped before its plan
    time_budget_init(&budget, o->minutes, run_start_time);
    budget.max_steps = (double)o->max_passes * (double)run.train.len / ((double)run.B * run.T);
    // until the plan (wsd: until the decay starts; its rate is constant till then)
    if (budget.budget_seconds > 0) o->iters = run.adamw.iters = run.adamw.decay_from = 1000000000;
    // Under mpirun, stdout is mpirun's pseudo-terminal, not the user's: a line
    // every step there can block rank 0 (and so every rank) once mpirun stops
    // reading it to end the job, so several processes print plain lines.
    int tokens_per_step = run.B * run.T, live = isatty(STDOUT_FILENO) && run.procs == 1;
    ProgressWindow *window = &run.window; // a resumed run's holds the steps since its last row
    float last_val = 0.0f / 0.0f, ms_per_iter = 0.0f, tokens_per_s = 0.0f;
    long steps_run = 0;
    while (run.opt.step < o->iters && !run_should_stop(&run, stop_requested) &&
           !(o->stop_at > 0 && run.opt.step >= o->stop_at)) {
        int threads_before = run.threads.current;
        thread_tuner_next(&run.threads); // the fastest thread count now (thread_tuner.h)
        int tuner_trial = run.threads.trial != 0;
        double t0 = now_seconds();
        float lr = lr_at(&run.adamw, run.opt.step);
        float loss = train_step(&run, lr, stop_requested); // forward, backward, clip, AdamW update
        double dt = now_seconds() - t0;
        thread_tuner_record(&run.threads, dt);
        train_seconds += dt;
        steps_run++;
        progress_add_step(window, dt, loss);
        long step = run.opt.step;

        int total = budget.budget_seconds > 0 && !budget.iters_fixed ? 0 : o->iters; // 0: not fixed yet
        if (live) print_live_progress(window, step, total, loss, lr, tokens_per_step);
        if (o->heatmaps_every > 0 && step % o->heatmaps_every == 0) take_snapshot(&run, &budget, step);
        int plan_now = 0, budget_on = budget.budget_seconds > 0;
        if (budget_on) {
            int was_planned = budget.planned;
            // the tuner moved: the steps timed on the count it left say
            // nothing of those to come, its trial's on the new count do
            if (run.threads.current != threads_before)
                time_budget_retime(&budget, run.threads.trial_seconds, run.threads.trial_steps);
            plan_now = time_budget_step(&budget, step, dt, !tuner_trial, o->warmup, now_seconds());
            if (run.procs > 1 && !was_planned) // rank 0 decides
                distributed_broadcast(&plan_now, sizeof plan_now);
        }
        if (budget_on && budget.planned && !budget.iters_fixed) { // wsd: the decay's start
            int decide[2] = {0, 0};
            decide[0] = time_budget_decay_now(&budget, step, now_seconds(), o->eval_every,
                                              o->heatmaps_every, o->warmup, o->decay_fraction,
                                              &decide[1]);
            if (run.procs > 1) distributed_broadcast(decide, sizeof decide);
            if (decide[0]) start_decay(&run, &budget, decide[1], live);
        } else if (budget_on && budget.iters_fixed && run.adamw.schedule == SCHEDULE_COSINE) {
            replan_cosine(&run, &budget, live);
        }
        int is_log = step % o->log_every == 0, is_eval = step % o->eval_every == 0 || step == o->iters;
        if (budget_on && !budget.planned) is_eval = 0; // evaluations wait for the plan
        if (is_log || is_eval || plan_now)
            ms_per_iter = log_window(window, run.log.file, step, total, lr, tokens_per_step,
                                     !live && is_log, !is_eval && !plan_now, &tokens_per_s);
        if (plan_now) // with a budget too small for more steps, the run ends here
            last_val = plan_time_budget(&run, &budget, lr, ms_per_iter, tokens_per_s, live);
        else if (is_eval)
            last_val = timed_evaluation(&run, &budget, step, lr, ms_per_iter, tokens_per_s, live);
        if (is_log || is_eval) {
            run_log_flush(&run.log);
            fflush(stdout);
        }
    }
    if (o->heatmaps_every > 0 && run.rank == 0) finish_heatmaps(&run.model, &run.probe, o->out);
    int interrupted = stop_requested ? stop_requested : run.stop_agreed ? SIGTERM : 0;
    int exit_code = finish(&run, &budget, interrupted, last_val, now_seconds() - run_start_time,
                           train_seconds, steps_run, live);
    run_free(&run);
    return exit_code;
}
