/* topk.h - a row's k best keys, kept as its key blocks stream by: the
 * top-k weights (attn_input.topk) without a row of weights in memory.
 * Internal to the engine (attention.c's tasks call it).
 *
 * Exact top-k in O(block) memory. A weight is exp(s - max) / sum with the
 * same max and sum across its row, so it is monotonic in its score s: the
 * k best scores of a row are its k best weights, and the online softmax can
 * keep them as the key blocks stream by, turning them into weights with the
 * row's final max and sum at the end. Nothing of the row is stored but the
 * k pairs, kept in the worker's scratch (the task's rows' k pairs: the size
 * of its part of the answer) as a heap whose root is the worst pair (the
 * lowest value; of equal values, the higher index), or, for k <= 16 where
 * the CPU has AVX-512 or AVX2, sorted in 16 slots (topk.c's
 * tk_lanes_insert). A candidate enters only when it beats the root; a
 * block of 16 scores is tested at once, so a row of a long sequence costs
 * a comparison a score and a sift-down a rare candidate. Candidates come in ascending key order, so
 * one equal to the root has a higher index than every member and stays out: of equal values the
 * lower index wins, the contract's order for ties. Masked keys are candidates too (score -inf,
 * weight 0), so a row with fewer than k allowed keys is filled with its lowest masked indices, and
 * a fully masked row gets keys 0..k-1. Key blocks that causal masking skips whole are offered as
 * masked without computing them (tk_pad).
 *
 * The head average is not monotonic in any one head's scores: its top-k
 * needs each head's final max and sum first. So the online pass keeps them
 * ([B,H,n] each, and a copy of Q, which Y overwrites), and a second pass
 * (attention.c's attn_topk_avg_task) walks the key blocks again per (b,
 * row block), recomputes every head's scores of the block, turns them into
 * weights with those max and sum, adds the heads up exactly as the dense
 * path does, and offers the averaged block to the heap: O(row block x key
 * block) memory, at the price of computing the scores twice.
 */
#ifndef ATTN_TOPK_H
#define ATTN_TOPK_H

#include <stddef.h>
#include <stdint.h>

/* Top-k of at most TK_LANES keys keeps each row's keys sorted in TK_LANES
 * slots where the CPU has AVX-512 or AVX2; otherwise, and for larger k, a
 * heap of k. A row's keys take tk_stride(k) 8-byte slots (uint64_t) of the
 * worker's scratch either way, and a count (int) starting at 0. */
#define TK_LANES 16
size_t tk_stride(int k);

/* The worst of a full row's k kept keys' values (its count is k). */
float tk_worst(const uint64_t *h, int k);

/* Offer s[0..len), the values of keys j0, j0+1, ..., to a row's kept keys
 * (at most k): its slots or its heap. Keys must be offered in ascending
 * order. */
void tk_offer(uint64_t *h, int *cnt, int k, const float *s, size_t len, int j0);

/* Keys [j0, j1) of a block skipped because it is fully masked: each is
 * offered as x, a masked key's score (-inf) or weight (0). */
void tk_pad(uint64_t *h, int *cnt, int k, int j0, int j1, float x);

/* The full row's k keys into its answer, best first: values v[0..k),
 * indices ix[0..k). */
void tk_emit(uint64_t *h, int k, float *v, int32_t *ix);

/* A row's k best scores into its weights, given the row's max and sum
 * (exp(s - max) / sum, the dense path's arithmetic), ordered by weight
 * descending, then lower index. */
void tk_finish(uint64_t *h, int k, float mx, float sum, float *v, int32_t *ix);

#endif
