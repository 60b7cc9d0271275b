// The wasm exports of ABI v1. A plugin's entry file re-exports them:
//
//   export * from "compact-host-sdk/exports";
//
// Request buffers come from heap.alloc and go back through heap.free
// (abi/README.md, "Memory ownership"); an answer frame is freed at the
// instance's next call, so it stays readable while the host copies it.

import { handleInfo, handleSummarize, handleTruncate } from "./index";

let lastAnswer: usize = 0;

function answer(packed: u64): u64 {
  lastAnswer = <usize>(packed >> 32);
  return packed;
}

function beginCall(): void {
  if (lastAnswer != 0) heap.free(lastAnswer);
  lastAnswer = 0;
}

export function compact_plugin_abi_v1(): void {}

export function compact_v1_alloc(size: u32): usize {
  return heap.alloc(size > 0 ? <usize>size : 1);
}

export function compact_v1_free(ptr: usize): void {
  heap.free(ptr);
}

export function compact_v1_info(): u64 {
  beginCall();
  return answer(handleInfo());
}

export function compact_v1_summarize(ptr: usize, len: u32): u64 {
  beginCall();
  return answer(handleSummarize(ptr, len));
}

export function compact_v1_truncate(ptr: usize, len: u32): u64 {
  beginCall();
  return answer(handleTruncate(ptr, len));
}
