// Walks an iron_plan_t on the host: value slots per function invocation,
// kernels, control flow, call_region for kernel regions. Internal to
// src/runtime.
#ifndef IRON_RUNTIME_EXECUTOR_H_
#define IRON_RUNTIME_EXECUTOR_H_

#include "compiler/plan.h"
#include "device/device.h"
#include "device/kernel.h"

// A value: its tensor and the reference it holds on the storage (NULL for
// 0-byte values and borrowed tensors).
typedef struct iron_slot {
  iron_tensor_t t;
  iron_storage_t *s;
} iron_slot_t;

typedef struct iron_exec_ctx {
  iron_kernel_ctx_t host;  // template; runtime is set per kernel call
  iron_device_t *dev;
  // A whole program is being recorded as one device graph (exec_graph.c):
  // loops run iteration by iteration into that recording, none records or
  // runs a graph of its own.
  bool program_recording;
} iron_exec_ctx_t;

void iron_exec_ctx_init(iron_exec_ctx_t *ctx, iron_device_t *dev);

// Runs function `f`. `args` (f's inputs) are moved in (the callee owns their
// references); on success `results` receive owned references. On error
// everything is released and `results` are left empty.
iron_status_t iron_exec_run_func(const iron_exec_ctx_t *ctx,
                                 const iron_plan_func_t *f, iron_slot_t *args,
                                 iron_slot_t *results);

// Kernel steps run on this thread so far (IRON_PROFILE counts launches).
extern _Thread_local uint64_t iron_exec_kernel_steps;
// Graph replays enqueued and graph recordings discarded on this thread
// (counted loops run as device graphs, executor.c).
extern _Thread_local uint64_t iron_exec_graph_launches;
extern _Thread_local uint64_t iron_exec_graph_discards;

// Whether every step of `b` (and of the functions it calls) only enqueues
// device work that a device graph can record (constants, aliases, kernels
// marked graph_capturable, calls of such functions; no control flow, no
// host-staged steps). *out_why names the first step that cannot (NULL when
// all can).
bool iron_exec_block_capturable(const iron_plan_block_t *b,
                                const iron_plan_step_t **out_why);
// The kernel steps a recording of `b` as one device graph would hold
// (calls followed; counted loops whose trip count is a compile-time
// constant unrolled: their body's steps times the trips, for a recording
// that runs them iteration by iteration), or -1 when `b` holds a step a
// graph cannot record or more than `max_steps` kernel steps. *out_saved:
// the kernel steps whose host time the graph saves per run: a loop of at
// least `loop_graph_trips` iterations (the device's graph_min_trips; 0:
// none) records its own body graph anyway, so it counts twice its body
// (the first iteration and the recording), not every iteration. *out_why
// names the first step that cannot be recorded (NULL when all can).
int64_t iron_exec_block_graph_steps(const iron_plan_block_t *b,
                                    int64_t max_steps,
                                    int64_t loop_graph_trips,
                                    int64_t *out_saved,
                                    const iron_plan_step_t **out_why);

// IRON_GRAPH_DEBUG=1: graph decisions and discards are said on stderr.
bool iron_exec_graph_debug(void);

// A pointer to an aligned dummy for 0-byte tensors (never dereferenced).
void *iron_exec_empty_data(void);

#endif  // IRON_RUNTIME_EXECUTOR_H_
