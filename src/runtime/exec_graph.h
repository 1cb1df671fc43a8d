// Whole programs as device graphs (issue 14, "faster where XLA is weak:
// dispatch"): an executable whose main function (with what it calls) only
// enqueues device work that a graph can record is recorded once, on its
// second call, as one device graph (a CUDA graph) and replayed by the calls
// after that: one graph launch instead of ~10-14 us of host time per kernel
// step. Arguments are copied into fixed "input homes" and results out
// (one batched copy launch each inside the graph, whose addresses come from
// a table uploaded per call; or, without batched copies, stream copies in
// and out of fixed "output homes"). The homes are a per-executable arena,
// accounted in the device's memory stats. Internal to
// src/runtime; the decision rule and its constants are in docs/decisions.md.
#ifndef IRON_RUNTIME_EXEC_GRAPH_H_
#define IRON_RUNTIME_EXEC_GRAPH_H_

#include <stdbool.h>
#include <stdint.h>

#include "compiler/plan.h"
#include "device/device.h"
#include "runtime/executor.h"

typedef struct iron_exec_graph iron_exec_graph_t;

// The state for one executable's program graph, or *out_graph = NULL when
// the device has no graphs, program graphs are off
// (dev->program_graph_min_steps == 0, IRON_SYNC=1), the program holds a step
// a graph cannot record, or the rule says replays would not pay. `main`,
// `in_types` and `out_types` are borrowed and must outlive the state (the
// executable owns them). Fails only when out of memory.
iron_status_t iron_exec_graph_create(iron_device_t *dev,
                                     const iron_plan_func_t *main,
                                     const iron_tensor_t *in_types,
                                     uint32_t num_in,
                                     const iron_tensor_t *out_types,
                                     uint32_t num_out,
                                     iron_exec_graph_t **out_graph);

// Ends the state: the recorded graph and the arena go back to the device.
// No call of iron_exec_graph_run may be under way. NULL is fine.
void iron_exec_graph_destroy(iron_exec_graph_t *g);

// Runs `main` as iron_exec_run_func does (`args` consumed, `results` owned
// on success, every result fresh device storage when replayed): the first
// call the ordinary way, the second records and replays, the later ones
// replay. Any failure to record runs the call the ordinary way; an error of
// a replay fails the call and drops the graph (the next call works, the
// ordinary way, and the one after records again; after a few failures the
// executable stops recording).
// Calls on several threads at once are fine: one records or replays, the
// others run the ordinary way. `g` may be NULL (the ordinary way).
iron_status_t iron_exec_graph_run(iron_exec_graph_t *g,
                                  const iron_exec_ctx_t *ctx,
                                  const iron_plan_func_t *main,
                                  iron_slot_t *args, iron_slot_t *results);

// The rule (docs/decisions.md, "Whole programs as CUDA graphs"): whether
// replaying a program of `kernel_steps` kernel steps pays, given that every
// call copies `num_in` arguments of `in_bytes` in total into their homes
// and `num_out` results of `out_bytes` out: `batched`, with one table
// upload and two batched copy launches inside the graph (device
// copy_batch); otherwise one stream copy per argument and result and the
// results twice (into output homes inside the graph, then to fresh
// storage). `min_steps` is the device's program_graph_min_steps.
bool iron_exec_graph_pays(int64_t kernel_steps, int64_t min_steps,
                          bool batched, uint32_t num_in, uint64_t in_bytes,
                          uint32_t num_out, uint64_t out_bytes);

// Bytes the arenas of all program graphs hold on `dev` now (tests).
int64_t iron_exec_graph_arena_bytes(const iron_device_t *dev);

// Gives back the arenas and graphs of `dev`'s program graphs that are not
// in use (memory pressure); they record again later. Any thread.
void iron_exec_graph_reclaim(iron_device_t *dev);

#endif  // IRON_RUNTIME_EXEC_GRAPH_H_
