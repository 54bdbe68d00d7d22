/* The op contract: the op table (arity, dtypes, whether an op launches, its shape rule) and
 * the rules every op shares (broadcasting, window geometry). The engine checks a node against
 * it once, when the node is added to a graph (cn_op_infer) and again for the launches the
 * planner fuses (cn_op_check); backends trust what reaches run() and their supports() only
 * says whether a device can run a launch. This header is the core's: backends include it,
 * it includes nothing of theirs.
 *
 * Layout conventions (every backend follows them):
 * - Tensors are dense, row-major, f32 unless stated. Images are NHWC.
 * - Broadcasting (ADD/SUB/MUL/DIV's second input, SUM_ROWS's output, EXPAND's input): the
 *   small shape, without its leading 1-sized dims, equals a trailing part of the full shape
 *   ([C], [1,C] and [1] all broadcast onto [N,H,W,C]); element i of the full tensor pairs
 *   with element i % numel(small). See cn_shape_broadcasts().
 * - MATMUL: a and b are both 2-D or both 3-D (batched, same batch). trans_a/trans_b select
 *   op(a)=[M,K], op(b)=[K,N]; out = op(a) op(b), shape [(B,) M, N].
 * - MATMUL_Q8 (int8 weight-only inference, engine/program_quant.c): a [M,K] f32, w [K,N] i8,
 *   scale [N] f32 -> out [M,N] = (a w)[m,n] * scale[n], the products of a and the widened
 *   bytes summed in float32, the scale applied once per output (equal to a times the
 *   dequantised w up to float32 rounding). No transposes, no batch, no epilogue.
 * - IM2COL: x [N,H,W,C] -> [N*OH*OW, KH*KW*C]; row = (n, oh, ow), column = (ki, kj, c) with
 *   c fastest, zero padding. COL2IM is its adjoint (sums overlapping windows) and gets the
 *   image shape as its output shape.
 * - Pools: x [N,H,W,C] -> [N,OH,OW,C], window (kh,kw), stride (sh,sw), padding (ph,pw);
 *   OH = (H + 2ph - kh)/sh + 1 (p.ceil_mode: cn_window_extent_ceil). Max pool ignores
 *   padding; MAXPOOL_GRAD routes each dy to the first maximum of its window (row-major scan),
 *   and with p.relu_mask zeroes dx where x <= 0 (the ReLU gradient of the x it pooled).
 *   Avg pool divides by cn_pool_divisor (kh*kw unless p.ceil_mode or p.exclude_pad).
 * - Window geometry in general (cn_window_of): padding before (ph, pw) and after (ph + ph_extra,
 *   pw + pw_extra: asymmetric padding), dilation (dh, dw; 0 reads as 1): window position
 *   (oh, ki) reads row oh*sh - ph + ki*dh, and OH = (H + pt + pb - (dh(kh-1)+1))/sh + 1.
 *   IM2COL, COL2IM and DWCONV honour dilation; the pools refuse it (their shape rule).
 *
 * Layout ops (layers-b; layouts in engine/ops_layers.c, which states their shape rules):
 * - PAD(x) along axis p.axis: p.before / p.after elements (negative: cropped, so a slice is a
 *   PAD) filled with p.fill (p.variant 0) or reflected without repeating the edge (variant
 *   1, PyTorch's "reflect"; then 0 <= before, after < dim). PAD_GRAD(dy) is the adjoint of a
 *   reflect PAD (the output shape given: the forward input's); a constant PAD's adjoint is
 *   the PAD with -before, -after and fill 0.
 * - CONCAT(a, b) along p.axis: every other dim equal; out = a's part then b's.
 * - UPSAMPLE(x [N,H,W,C]) -> [N, H*sh, W*sw, C] (p.sh, p.sw integer factors): variant 0
 *   nearest (source row oh/sh), 1 bilinear with PyTorch's align_corners=False (source
 *   coordinate (o + 0.5)/s - 0.5, clamped below at 0, neighbours clamped to the edge).
 *   UPSAMPLE_GRAD(dy) -> the given [N,H,W,C]: the adjoint, each input pixel gathering its
 *   contributions in a fixed order (no atomics).
 * - DWCONV(x [N,H,W,C], w [KH,KW,C]) -> [N,OH,OW,C]: depthwise convolution, window geometry
 *   as above (kh, kw from w); out[n,oh,ow,c] = sum over (ki,kj) of x * w[ki,kj,c], padding
 *   zero. DWCONV_GRAD_X(dy, w) -> the given image shape; DWCONV_GRAD_W(dy, x) -> [KH,KW,C]
 *   (p.kh, p.kw), summed over (n, oh, ow) in that order by one writer per element.
 * - Last-axis ops (SOFTMAX, LOG_SOFTMAX, ARGMAX) treat x as [rows, C] with C the last dim.
 * - XENT: logits [N,C], labels i32 [N] -> [1] mean over N of -log_softmax(logits)[label].
 *   XENT_GRAD(dy[1], logits, labels) = dy * (softmax(logits) - onehot(label)) / N.
 * - ACCURACY(logits [N,C], labels i32 [N]) -> [1] count (as float) of argmax == label.
 * - SUM_ROWS: x -> the node's output shape, which broadcasts onto x's; out[j] sums the x[i]
 *   with i % numel(out) == j. EXPAND is its adjoint: out[i] = alpha * x[i % numel(x)] with
 *   the output shape given by the node (x broadcasts onto it).
 * - DROPOUT / DROPOUT_GRAD: keep element i iff cn_rng_uniform(seed, step, i) >= rate; kept
 *   elements are scaled by 1/(1-rate). "step" is the launch's step counter.
 * - ADAM(param, grad, m, v, rate) and SGD(param, grad, velocity, rate) update param and their
 *   state in place; the node's output is param itself. "step" (t, 1-based) drives bias
 *   correction. rate is the step's block, f32 [CN_RATE_LEN] on the device (below): the
 *   learning rate is data the session writes once per step, not a launch parameter, so a
 *   schedule changes no launch and the update plan is built once. Each gradient element is
 *   first multiplied by rate[CN_RATE_GRAD_SCALE], then, when p.clip_value > 0, clamped to
 *   [-clip_value, clip_value] (a NaN stays NaN), before weight decay is added.
 * - CLIP_SCALE(rate [CN_RATE_LEN], sumsq [1]) -> [CN_RATE_LEN]: rate with its grad scale
 *   multiplied by min(1, p.clip_norm / (sqrt(sumsq) + 1e-6)) (PyTorch's clip_grad_norm_),
 *   other elements copied. sumsq is the sum of squares of every gradient; the session
 *   computes it on the device (MUL, SUM_ALL, ADD), so clipping by norm needs no host sync.
 *
 * Transformer ops (gradient ops take the incoming gradient first, as above):
 * - LAYERNORM(x [...,C], gamma [C], beta [C]) -> x's shape: per row of the last axis,
 *   (x - mean) * rstd * gamma + beta with the biased variance and rstd = 1/sqrt(var + eps)
 *   (p.eps; PyTorch's layer_norm). LAYERNORM_GRAD(dy, x, gamma) -> x's shape recomputes mean
 *   and rstd: p.variant 0 gives dx, 1 gives dy * xhat (xhat = (x - mean) * rstd), whose
 *   SUM_ROWS over the leading axes is dgamma, and 2 gives that dgamma [C] itself (one pass,
 *   no [rows, C] product in memory; what autodiff emits); dbeta is SUM_ROWS(dy). Fused residual: the
 *   planner may fold ADD(LAYERNORM_GRAD variant 0, r) into the gradient launch with n_in ==
 *   4, in[3] = r of dx's shape and type: out = dx + r, dx rounded to float32 first, so the
 *   float32 result is the unfused ADD's bit for bit (cn_op_fused_residual).
 * - EMBEDDING(table [V,D], ids i32 [...]) -> [..., D]: row ids[i] of the table. An id outside
 *   [0, V) gives a zero row (kernels never read outside the table; rejecting such ids is the
 *   feeder's job). EMBEDDING_GRAD(dy [..., D], ids) -> [V, D] (shape given by the node):
 *   out[v] = sum of dy rows whose id is v, added in increasing index order by a single
 *   writer per element (no atomics), so it is bit-identical run to run and across backends;
 *   out-of-range ids contribute nothing.
 * - GELU(x), GELU_GRAD(dy, x): p.variant 0 = exact x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
 *   (PyTorch's nn.GELU() default), 1 = the tanh approximation
 *   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate='tanh').
 * - SUM_LAST, MEAN_LAST, MAX_LAST: x [..., C] -> [...] (the last axis dropped; a 1-D x gives
 *   [1]). MAX_LAST_GRAD(dy [...], x) routes dy to the first maximum of each row.
 *   BCAST_LAST(x [...]) -> [..., C] (shape given by the node: x's dims plus one, or [C] for
 *   x = [1]): out[r, j] = alpha * x[r]; the adjoint of SUM_LAST (alpha 1) and MEAN_LAST (1/C).
 * - CAUSAL_MASK(x [..., T, S]) -> x's shape: x[..., i, j] for j <= i, p.fill for j > i
 *   (-INFINITY before a SOFTMAX; its own adjoint with fill 0). A separate op rather than a
 *   masked softmax: SOFTMAX stays one op with one rule, and the unfused attention reads as
 *   matmul, scale, mask, softmax, matmul.
 * - ATTENTION(q [BH,T,D], k [BH,S,D], v [BH,S,D]) -> [BH,T,D]: softmax(p.scale * q k^T
 *   (+ causal mask when p.causal: key j > query i excluded)) v per leading index (batch x
 *   heads flattened, row-major, [B,H,T,D] reshaped). Builders pass scale = 1/sqrt(D).
 *   ATTENTION_LSE(q, k) -> [BH,T]: the per-row log-sum-exp of the (masked, scaled) scores,
 *   f32 whatever q's storage type (the backward exponentiates differences with it). The
 *   planner may let an ATTENTION of the same q, k write it (cn_launch.also, planner.c).
 *   ATTENTION_GRAD(dO, q, k, v, lse, delta) with delta = SUM_LAST(dO * O) -> dq (p.variant
 *   0, q's shape), dk (1) or dv (2), or (3) all three from one recomputation of P, packed
 *   as [BH T + 2 BH S, D]: dq's BH T rows, then dk's BH S, then dv's. The backward rule emits
 *   one node per gradient; the planner runs the three as one launch (dq's, writing dk and dv
 *   through cn_launch.also: variant 3's arithmetic into three buffers, docs/DESIGN.md).
 *   No T x T buffer exists anywhere.
 * - Key/value cache of generation (engine/generate.c): KV_WRITE(cache [H,C,D], rows [BH,T,D],
 *   pos i32 [1]) updates cache in place: cache[h0 + b, pos + t] = rows[b, t] for the t with
 *   0 <= pos + t < C (rows that fall outside are dropped), every other row untouched; h0 =
 *   p.before, BH + h0 <= H (0 and BH = H but for STEP's cache of every layer).
 *   ATTEND_CACHE(q [BH,T,D], k [BH,C,D], v [BH,C,D], pos i32 [1]) -> [BH,T,D]: query t is at
 *   position pos + t and attends the keys 0 .. min(pos + t, C - 1) with scale p.scale, as
 *   ATTENTION's causal rows do (a query row with no key, pos + t < 0, is 0). pos is read on
 *   the device, so one plan serves every step.
 *   KV_WRITE_Q8 and ATTEND_CACHE_Q8 are the same over an int8 cache: i32 [BH,C,W] with
 *   W = 1 + ceil(D/4) words a row: word 0 the row's scale 2^s as f32 bits, then the values,
 *   four a word, value e in bits 8 (e%4) .. 8 (e%4) + 7 of word 1 + e/4 (two's complement,
 *   unused bytes 0). KV_WRITE_Q8 quantizes each row x: m = max |x| = f 2^e (f in
 *   [0.5, 1); e = 0 for m = 0), s = e - 7, values clamp(rint(x 2^-s), -127, 127); a power-of-two scale makes
 *   it exact arithmetic (the same bits on every device), and the error of a value is at
 *   most m / 64 (the rounding's half step 2^(s-1) <= m / 128, or the clamp's one step).
 *   ATTEND_CACHE_Q8 reads value e as the integer times 2^s (exact in f32).
 * - A generation step's fused launches (engine/generate.c: one token, so a step is mostly
 *   launch overhead; inference only, no gradient: not differentiable in the table). Products
 *   of a few rows (R, 1 in a step) with a weight, each output element a float sum over k in
 *   increasing order:
 *   NORM_DENSE(x [R,K], gamma [K], beta [K], w [K,N], b [N]) -> [R,N]: act(LAYERNORM(x) w + b)
 *   with LAYERNORM's statistics (p.eps), the normalized row kept in float; act by p.variant:
 *   0 none, 1 GELU (erf), 2 GELU (tanh form).
 *   DENSE_ADD(x [R,K], w [K,N], b [N], res [R,N]) -> [R,N]: x w + b + res (a residual block's
 *   last dense).
 *   ATTEND_QKV(cache [3BH,C,D], pos i32 [1]) -> [BH,1,D]: one query a head over a cache that
 *   holds each position's query, key and value rows (KV_WRITE of [3BH,T,D] rows: heads
 *   0..BH-1 queries, then keys, then values): query cache[b, pos] attends keys
 *   cache[BH + b, 0..pos] and values cache[2BH + b, 0..pos] as ATTEND_CACHE does (scale
 *   p.scale); pos outside [0, C) gives 0 rows.
 *   NORM_DENSE_KV(cache [H,C,D], x [R,K], norm [2K], w [K,N], b [N], pos i32 [1]) updates cache
 *   in place (N = H D): row r of NORM_DENSE(x, gamma = norm[0..K), beta = norm[K..2K), w, b)
 *   (no activation) is cache rows pos + r of every head, element n in head n / D (KV_WRITE of
 *   its [H, R, D] view; rows outside [0, C) dropped).
 *   ATTEND_PROJ(cache [3BH,C,D], pos i32 [1], w [BH D, N], b [N], res [1,N]) -> [1,N]:
 *   ATTEND_QKV's [BH,1,D] as a row [1, BH D], times w, + b + res (attention's output
 *   projection and its residual add), the attended row kept in float.
 *   MLP_ROW(x [R,K], norm [2K], w1 [K,F], b1 [F], w2 [F,K], b2 [K]) -> [R,K]: x +
 *   act(LAYERNORM(x) w1 + b1) w2 + b2 (a pre-norm block's MLP with its residual; gamma, beta
 *   packed as in NORM_DENSE_KV, act by p.variant as NORM_DENSE's), the hidden row in float.
 *   EMBED_ADD(table [V,D], ids i32 [...], ptable [P,D], positions i32 [...]) -> [..., D]:
 *   EMBEDDING(table, ids) + EMBEDDING(ptable, positions) (a token's and its position's
 *   vectors; ids and positions of one shape).
 *   BLOCK_STEP(cache [3BH,C,D], x [1,K], pack [9K + 4K^2 + 2KF + F], pos i32 [1]) -> [1,K]
 *   (f32 only): a whole pre-norm transformer block for one token, K = BH D, in one launch:
 *   NORM_DENSE_KV into cache (norm1, the q|k|v weight and bias; p.eps), then ATTEND_PROJ
 *   (w_o, b_o, res x; p.scale) into y, then MLP_ROW on y (norm2, w1, b1, w2, b2; eps
 *   p.alpha, act p.variant), with the operands packed in that order, each flattened:
 *   norm1 [2K], w_qkv [K,3K], b_qkv [3K], w_o [K,K], b_o [K], norm2 [2K], w1 [K,F], b1 [F],
 *   w2 [F,K], b2 [K] (F follows from the pack's length). The one op that writes an input it
 *   does not return: row pos of cache is updated in place as NORM_DENSE_KV's, so a step
 *   needs no second launch for it; the step graph reads each cache in this op alone (an op
 *   has one output, and a block's output is its residual row). f32 only, so that no backend
 *   runs it on a widened copy of the cache.
 *   STEP(cache [3 BH L + 1, C, D], pack, fed i32 [2]) -> [1,V] (f32 only): a whole step of a
 *   token model of L such blocks in one launch, fed = {pos, token}: EMBED_ADD of the token
 *   and pos (tables [V,K] and [P,K]), the blocks' BLOCK_STEPs (block l's cache is heads
 *   3 BH l .. 3 BH (l + 1) - 1), then NORM_DENSE (no activation) to the logits. The pack is
 *   the tables, the L blocks' packs (BLOCK_STEP's), the last norm [2K], w [K,V], b [V]; the
 *   cache's last plane is the residual rows' scratch (x, y: 2K <= C D), written too. BH, F,
 *   V, P: p.kh, p.kw, p.sh, p.sw; one eps (p.eps) for every norm, act p.variant, p.scale.
 *   STEPS(cache, pack, fed i32 [3]) -> [1, V + C] (f32 only): greedy decoding in one launch,
 *   fed = {pos, token, count}: count STEPs, step t at position pos + t fed token_t (token_0 =
 *   token), token_{t+1} the first maximum of its logits (the lowest index of the largest
 *   value; a NaN never wins). Out: the last step's logits (zeros when count < 1), then
 *   token_1 .. token_count as floats (exact), -1 after them. The host keeps pos + count <= C
 *   (rows past the cache are not written and attend to nothing, as STEP's).
 *
 * Layer ops of issue 16 (shape rules in ops_layers.c; PyTorch's semantics throughout):
 * - Activations, each x -> x's shape: LEAKY_RELU x > 0 ? x : p.alpha * x (PyTorch's slope
 *   default 0.01); ELU x > 0 ? x : p.alpha * expm1(x); CLIP min(max(x, p.alpha), p.beta)
 *   (ReLU6 is CLIP 0 6; hardtanh); SILU x / (1 + exp(-x)); HARD_SIGMOID min(max(x + 3, 0), 6)
 *   / 6; HARD_SWISH x * min(max(x + 3, 0), 6) / 6; SOFTPLUS x > 20 ? x : log1p(exp(x))
 *   (beta 1, threshold 20). ACT_GRAD(dy, x) -> x's shape is the gradient of the activation
 *   whose op is p.variant (with that op's alpha and beta), computed from the forward input x
 *   as PyTorch's *_backward: at the kinks LEAKY_RELU and ELU take the x <= 0 side, CLIP and
 *   HARD_SIGMOID give 0 at their ends, HARD_SWISH gives dy * (x/3 + 1/2) on [-3, 3].
 * - Channel ops treat an image [N,H,W,C] (any x of 2 or more dims) as [N, S, C]:
 *   CHANNEL_ADD(x, s [N,C]) and CHANNEL_MUL(x, s) -> x's shape, out[n,i,c] = x[n,i,c] (+|*)
 *   s[n,c] (squeeze-and-excitation). CHANNEL_SUM(x) -> [N,C], p.alpha * sum over S (global
 *   average pooling: alpha = 1/S); CHANNEL_MAX(x) -> [N,C] (global max pooling);
 *   CHANNEL_MAX_GRAD(dy [N,C], x) -> x's shape, dy routed to the first maximum over S;
 *   CHANNEL_BCAST(s [N,C]) -> the given shape [N,...,C], p.alpha * s[n,c] (CHANNEL_SUM's
 *   adjoint).
 * - BATCHNORM(x [..., C], gamma [C], beta [C], running [2,C]) -> x's shape: per channel c over
 *   every other axis (R rows), (x - mean) / sqrt(var + p.eps) * gamma + beta. p.running 0:
 *   mean and the biased var of this batch (R must be > 1: PyTorch refuses one value per
 *   channel too); 1: running[0] and running[1]. BATCHNORM_GRAD(dy, x, gamma, running): p.variant
 *   0 gives dx (through the batch statistics when p.running is 0), 1 gives dy * xhat, whose
 *   SUM_ROWS is dgamma; dbeta is SUM_ROWS(dy). BN_RUNNING(running [2,C], x) updates running
 *   in place: running[0] = (1-m) running[0] + m mean, running[1] = (1-m) running[1] +
 *   m var * R/(R-1) (the unbiased variance, as PyTorch), m = p.momentum.
 *   BN_FOLD(gamma [C], beta [C], running [2,C]) -> [C]: p.variant 0 gives the scale
 *   gamma / sqrt(running[1] + p.eps), 1 the shift beta - running[0] * scale, so that the
 *   inference form is x * scale + shift (an inference session folds them into the weights
 *   and bias of the convolution or dense layer before it, program_fold.c). *
 * Elementwise math of issue 18 §3 (kernels_cl/math.cl, omp_math.c; b broadcasts onto a as for
 * ADD, element i pairing with i % numel(b)):
 * - MAXIMUM(a, b), MINIMUM(a, b): torch.maximum/minimum: a NaN on either side gives NaN, a
 *   tie gives a. MINMAX_GRAD(dy, a, b) -> a's shape: p.variant bit 0 = MINIMUM's (else
 *   MAXIMUM's), bit 1 = the gradient of b (else of a), before b's reduction to its shape
 *   (SUM_ROWS): the input that lost gets 0, a tie gives each dy / 2, anything else (NaN) dy,
 *   as PyTorch's derivative formulas do.
 * - POW(a, b): pow(a, b) (C's powf: a negative base with an integer exponent is exact in
 *   sign, a non-integer one NaN). POW_GRAD(dy, a, b) -> a's shape: p.variant 0 gives
 *   dy * b * pow(a, b - 1) (0 where b == 0), 1 gives dy * pow(a, b) * log(a) (0 where a == 0
 *   and b >= 0), PyTorch's pow_backward_self/_exponent.
 * - FLOOR, CEIL (exact; their gradient is 0), ERF (its gradient 2/sqrt(pi) exp(-x^2) is
 *   composed by autodiff from MUL, SCALE and EXP).
 * - COMPARE(a, b): a mask, 1 where the comparison holds and 0 elsewhere (NaN compares false,
 *   but unequal), in the inputs' storage type: p.variant 0 a < b, 1 a > b, 2 a == b, 3 a <= b,
 *   4 a >= b. clnet's booleans are such masks (docs/DESIGN.md); not differentiable (no
 *   gradient flows through a comparison, as through PyTorch's bool tensors).
 * - MAXPOOL_ARGMAX(x [N,H,W,C]) -> [N,OH,OW,C] f32, MAXPOOL's window geometry: where the
 *   first maximum of each window (MAXPOOL_GRAD's winner) lies in the NCHW tensor, ONNX
 *   MaxPool's Indices: ((n*C + c)*H + h)*W + w, p.variant 1 (ONNX storage_order=1)
 *   (n*C + c)*H*W + h + w*H, -1 for a window wholly in the padding. An index output: not
 *   differentiable; an x of more than 2^24 elements is refused (its indices would not all be
 *   exact in a float).
 * - SELECT(c, a, b) -> a's shape, c and b broadcast onto it: ONNX Where and torch.where,
 *   a where c[i % numel(c)] != 0 (p.variant 1: == 0), else b[i % numel(b)].
 *   Nothing is computed, so inf and NaN pass as they are (masked_fill's -inf). Differentiable
 *   in a and b (dy where each was taken, 0 elsewhere: SELECT of dy and a zero); c, a mask,
 *   gets no gradient.
 */
#ifndef CN_OPS_H
#define CN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "clnet.h"

/* X(NAME, "name", arity, differentiable, launches, dtypes, shape rule, storage, takes epilogue,
 *   as epilogue)
 * - launches: 0 for nodes the executor resolves itself (leaves are bound, reshapes are views).
 * - dtypes: "<inputs>:<output>", one letter per tensor: f = f32, i = i32, q = i8, * = any; h = a float
 *   storage type (f32, f16 or bf16: engine/storage.h), the same for every h of one launch; an
 *   output of several letters allows each (the first is what the graph makes), "=" is input 0's
 *   dtype, an output h the inputs' storage type, an output c the float type p.variant names
 *   (CAST).
 * - shape rule: how the output shape follows from the inputs, parameters and (for some rules)
 *   the shape the caller asks for; one case of cn_op_infer() per rule (CN_RULE_<rule>).
 * - storage (CN_STORE_<storage>): where the value lives: OWN, a buffer of its own; VIEW, input
 *   0's buffer seen with another shape (no launch); INPLACE, input 0's buffer updated by the
 *   launch (the optimizer steps). The planner reads it to share and bind buffers.
 * - takes epilogue: 1 where the launch applies an activation to its output (cn_epilogue);
 *   as epilogue (CN_EPI_<as>): the epilogue an activation becomes when the planner folds it
 *   into such a producer (NONE: never folded).
 * Users of the table take (NAME, ...) so a new column does not touch them. */
#define CN_OP_TABLE(X)                                                                \
    X(LEAF, "leaf", 0, 1, 0, "", LEAF, OWN, 0, NONE)                                  \
    X(RESHAPE, "reshape", 1, 1, 0, "*:=", VIEW, VIEW, 0, NONE)                        \
    X(MATMUL, "matmul", 2, 1, 1, "hh:h", MATMUL, OWN, 1, NONE)                        \
    X(ADD, "add", 2, 1, 1, "hh:h", BROADCAST, OWN, 1, NONE)                           \
    X(SUB, "sub", 2, 1, 1, "hh:h", BROADCAST, OWN, 0, NONE)                           \
    X(MUL, "mul", 2, 1, 1, "hh:h", BROADCAST, OWN, 0, NONE)                           \
    X(DIV, "div", 2, 1, 1, "hh:h", BROADCAST, OWN, 0, NONE)                           \
    X(SCALE, "scale", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                             \
    X(RELU, "relu", 1, 1, 1, "h:h", SAME, OWN, 0, RELU)                               \
    X(SIGMOID, "sigmoid", 1, 1, 1, "h:h", SAME, OWN, 0, SIGMOID)                      \
    X(TANH, "tanh", 1, 1, 1, "h:h", SAME, OWN, 0, TANH)                               \
    X(EXP, "exp", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                                 \
    X(LOG, "log", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                                 \
    X(RELU_GRAD, "relu_grad", 2, 0, 1, "hh:h", SAME_PAIR, OWN, 0, NONE)               \
    X(SIGMOID_GRAD, "sigmoid_grad", 2, 0, 1, "hh:h", SAME_PAIR, OWN, 0, NONE)         \
    X(TANH_GRAD, "tanh_grad", 2, 0, 1, "hh:h", SAME_PAIR, OWN, 0, NONE)               \
    X(SOFTMAX, "softmax", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                         \
    X(LOG_SOFTMAX, "log_softmax", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                 \
    X(SOFTMAX_GRAD, "softmax_grad", 2, 0, 1, "hh:h", SAME_PAIR, OWN, 0, NONE)         \
    X(LOG_SOFTMAX_GRAD, "log_softmax_grad", 2, 0, 1, "hh:h", SAME_PAIR, OWN, 0, NONE) \
    X(XENT, "cross_entropy", 2, 1, 1, "hi:f", CLASSIFY, OWN, 0, NONE)                 \
    X(XENT_GRAD, "cross_entropy_grad", 3, 0, 1, "fhi:h", XENT_GRAD, OWN, 0, NONE)     \
    X(SUM_ALL, "sum", 1, 1, 1, "h:h", SCALAR, OWN, 0, NONE)                           \
    X(MEAN_ALL, "mean", 1, 1, 1, "h:h", SCALAR, OWN, 0, NONE)                         \
    X(SUM_ROWS, "sum_rows", 1, 1, 1, "h:h", REDUCE_TO, OWN, 0, NONE)                  \
    X(EXPAND, "expand", 1, 1, 1, "h:h", BROADCAST_TO, OWN, 0, NONE)                   \
    X(TRANSPOSE, "transpose", 1, 1, 1, "h:h", PERMUTE, OWN, 0, NONE)                  \
    X(IM2COL, "im2col", 1, 1, 1, "h:h", PATCHES, OWN, 0, NONE)                        \
    X(COL2IM, "col2im", 1, 1, 1, "h:h", UNPATCH, OWN, 0, NONE)                        \
    X(MAXPOOL, "maxpool", 1, 1, 1, "h:h", POOL, OWN, 0, NONE)                         \
    X(MAXPOOL_GRAD, "maxpool_grad", 2, 0, 1, "hh:h", POOL_GRAD, OWN, 0, NONE)         \
    X(AVGPOOL, "avgpool", 1, 1, 1, "h:h", POOL, OWN, 0, NONE)                         \
    X(AVGPOOL_GRAD, "avgpool_grad", 1, 0, 1, "h:h", UNPOOL, OWN, 0, NONE)             \
    X(DROPOUT, "dropout", 1, 1, 1, "h:h", MASK, OWN, 0, NONE)                         \
    X(DROPOUT_GRAD, "dropout_grad", 1, 0, 1, "h:h", MASK, OWN, 0, NONE)               \
    X(ARGMAX, "argmax", 1, 0, 1, "h:if", ROWS, OWN, 0, NONE)                          \
    X(ACCURACY, "accuracy", 2, 0, 1, "hi:f", CLASSIFY, OWN, 0, NONE)                  \
    X(ADAM, "adam", 5, 0, 1, "fffff:f", UPDATE, INPLACE, 0, NONE)                     \
    X(SGD, "sgd", 4, 0, 1, "ffff:f", UPDATE, INPLACE, 0, NONE)                        \
    X(CLIP_SCALE, "clip_scale", 2, 0, 1, "ff:f", CLIP, OWN, 0, NONE)                  \
    X(LAYERNORM, "layer_norm", 3, 1, 1, "hhh:h", NORM, OWN, 0, NONE)                  \
    X(LAYERNORM_GRAD, "layer_norm_grad", 3, 0, 1, "hhh:h", NORM_GRAD, OWN, 0, NONE)   \
    X(EMBEDDING, "embedding", 2, 1, 1, "hi:h", GATHER, OWN, 0, NONE)                  \
    X(EMBEDDING_GRAD, "embedding_grad", 2, 0, 1, "hi:h", SCATTER, OWN, 0, NONE)       \
    X(GELU, "gelu", 1, 1, 1, "h:h", GELU, OWN, 0, NONE)                               \
    X(GELU_GRAD, "gelu_grad", 2, 0, 1, "hh:h", GELU_GRAD, OWN, 0, NONE)               \
    X(SUM_LAST, "sum_last", 1, 1, 1, "h:h", ROWS, OWN, 0, NONE)                       \
    X(MEAN_LAST, "mean_last", 1, 1, 1, "h:h", ROWS, OWN, 0, NONE)                     \
    X(MAX_LAST, "max_last", 1, 1, 1, "h:h", ROWS, OWN, 0, NONE)                       \
    X(MAX_LAST_GRAD, "max_last_grad", 2, 0, 1, "hh:h", ROWS_GRAD, OWN, 0, NONE)       \
    X(BCAST_LAST, "broadcast_last", 1, 1, 1, "h:h", UNROWS, OWN, 0, NONE)             \
    X(CAUSAL_MASK, "causal_mask", 1, 1, 1, "h:h", CAUSAL, OWN, 0, NONE)               \
    X(ATTENTION, "attention", 3, 1, 1, "hhh:h", ATTENTION, OWN, 0, NONE)              \
    X(ATTENTION_LSE, "attention_lse", 2, 0, 1, "hh:f", ATTENTION, OWN, 0, NONE)       \
    X(ATTENTION_GRAD, "attention_grad", 6, 0, 1, "hhhhfh:h", ATTENTION, OWN, 0, NONE) \
    X(PAD, "pad", 1, 1, 1, "h:h", PAD, OWN, 0, NONE)                                  \
    X(PAD_GRAD, "pad_grad", 1, 0, 1, "h:h", UNPAD, OWN, 0, NONE)                      \
    X(CONCAT, "concat", 2, 1, 1, "hh:h", CONCAT, OWN, 0, NONE)                        \
    X(UPSAMPLE, "upsample", 1, 1, 1, "h:h", UPSAMPLE, OWN, 0, NONE)                   \
    X(UPSAMPLE_GRAD, "upsample_grad", 1, 0, 1, "h:h", DOWNSAMPLE, OWN, 0, NONE)       \
    X(DWCONV, "depthwise_conv", 2, 1, 1, "hh:h", DWCONV, OWN, 1, NONE)                \
    X(DWCONV_GRAD_X, "depthwise_conv_grad_x", 2, 0, 1, "hh:h", DWCONV_GRAD_X, OWN, 0, NONE) \
    X(DWCONV_GRAD_W, "depthwise_conv_grad_w", 2, 0, 1, "hh:h", DWCONV_GRAD_W, OWN, 0, NONE)   \
    X(LEAKY_RELU, "leaky_relu", 1, 1, 1, "h:h", ACT, OWN, 0, NONE)                        \
    X(ELU, "elu", 1, 1, 1, "h:h", ACT, OWN, 0, NONE)                                      \
    X(CLIP, "clip", 1, 1, 1, "h:h", ACT, OWN, 0, NONE)                                    \
    X(SILU, "silu", 1, 1, 1, "h:h", ACT, OWN, 0, SILU)                                    \
    X(HARD_SIGMOID, "hard_sigmoid", 1, 1, 1, "h:h", ACT, OWN, 0, HARD_SIGMOID)            \
    X(HARD_SWISH, "hard_swish", 1, 1, 1, "h:h", ACT, OWN, 0, HARD_SWISH)                  \
    X(SOFTPLUS, "softplus", 1, 1, 1, "h:h", ACT, OWN, 0, SOFTPLUS)                        \
    X(ACT_GRAD, "activation_grad", 2, 0, 1, "hh:h", ACT_GRAD, OWN, 0, NONE)               \
    X(CHANNEL_ADD, "channel_add", 2, 1, 1, "hh:h", CHANNEL, OWN, 0, NONE)                 \
    X(CHANNEL_MUL, "channel_mul", 2, 1, 1, "hh:h", CHANNEL, OWN, 0, NONE)                 \
    X(CHANNEL_SUM, "channel_sum", 1, 1, 1, "h:h", CHANNEL_REDUCE, OWN, 0, NONE)           \
    X(CHANNEL_MAX, "channel_max", 1, 1, 1, "h:h", CHANNEL_REDUCE, OWN, 0, NONE)           \
    X(CHANNEL_MAX_GRAD, "channel_max_grad", 2, 0, 1, "hh:h", CHANNEL_GRAD, OWN, 0, NONE)  \
    X(CHANNEL_BCAST, "channel_broadcast", 1, 1, 1, "h:h", CHANNEL_BCAST, OWN, 0, NONE)    \
    X(BATCHNORM, "batch_norm", 4, 1, 1, "hfff:h", BATCHNORM, OWN, 0, NONE)                \
    X(BATCHNORM_GRAD, "batch_norm_grad", 4, 0, 1, "hhff:h", BATCHNORM, OWN, 0, NONE)      \
    X(BN_RUNNING, "batch_norm_running", 2, 0, 1, "fh:f", BN_RUNNING, INPLACE, 0, NONE)  \
    X(BN_FOLD, "batch_norm_fold", 3, 0, 1, "fff:f", BN_FOLD, OWN, 0, NONE)                \
    X(CAST, "cast", 1, 1, 1, "h:c", SAME, OWN, 0, NONE)                                   \
    X(KV_WRITE, "kv_write", 3, 0, 1, "hhi:h", KV_WRITE, INPLACE, 0, NONE)                 \
    X(ATTEND_CACHE, "attend_cache", 4, 0, 1, "hhhi:h", ATTEND_CACHE, OWN, 0, NONE)       \
    X(KV_WRITE_Q8, "kv_write_q8", 3, 0, 1, "ihi:i", KV_WRITE, INPLACE, 0, NONE)          \
    X(ATTEND_CACHE_Q8, "attend_cache_q8", 4, 0, 1, "hiii:h", ATTEND_CACHE, OWN, 0, NONE) \
    X(MATMUL_Q8, "matmul_int8", 3, 0, 1, "fqf:f", MATMUL_Q8, OWN, 0, NONE)               \
    X(NORM_DENSE, "norm_dense", 5, 0, 1, "hhhhh:h", DENSE_ROWS, OWN, 0, NONE)             \
    X(DENSE_ADD, "dense_add", 4, 0, 1, "hhhh:h", DENSE_ROWS, OWN, 0, NONE)                \
    X(ATTEND_QKV, "attend_qkv", 2, 0, 1, "hi:h", ATTEND_QKV, OWN, 0, NONE)                \
    X(NORM_DENSE_KV, "norm_dense_kv", 6, 0, 1, "hhhhhi:h", DENSE_ROWS, INPLACE, 0, NONE)  \
    X(ATTEND_PROJ, "attend_proj", 5, 0, 1, "hihhh:h", ATTEND_QKV, OWN, 0, NONE)           \
    X(MLP_ROW, "mlp_row", 6, 0, 1, "hhhhhh:h", DENSE_ROWS, OWN, 0, NONE)                  \
    X(EMBED_ADD, "embedding_add", 4, 0, 1, "hihi:h", ATTEND_QKV, OWN, 0, NONE)                \
    X(BLOCK_STEP, "block_step", 4, 0, 1, "fffi:f", ATTEND_QKV, OWN, 0, NONE)               \
    X(STEP, "step", 3, 0, 1, "ffi:f", ATTEND_QKV, OWN, 0, NONE)                            \
    X(STEPS, "steps", 3, 0, 1, "ffi:f", ATTEND_QKV, OWN, 0, NONE)                          \
    X(MAXIMUM, "maximum", 2, 1, 1, "hh:h", BROADCAST, OWN, 0, NONE)                       \
    X(MINIMUM, "minimum", 2, 1, 1, "hh:h", BROADCAST, OWN, 0, NONE)                       \
    X(MINMAX_GRAD, "minmax_grad", 3, 0, 1, "hhh:h", BINARY_GRAD, OWN, 0, NONE)            \
    X(POW, "pow", 2, 1, 1, "hh:h", BROADCAST, OWN, 0, NONE)                               \
    X(POW_GRAD, "pow_grad", 3, 0, 1, "hhh:h", BINARY_GRAD, OWN, 0, NONE)                  \
    X(FLOOR, "floor", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                                 \
    X(CEIL, "ceil", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                                   \
    X(ERF, "erf", 1, 1, 1, "h:h", SAME, OWN, 0, NONE)                                     \
    X(COMPARE, "compare", 2, 0, 1, "hh:h", BROADCAST, OWN, 0, NONE)                       \
    X(MAXPOOL_ARGMAX, "maxpool_argmax", 1, 0, 1, "h:f", POOL, OWN, 0, NONE)               \
    X(SELECT, "select", 3, 1, 1, "hhh:h", SELECT, OWN, 0, NONE)

typedef enum cn_op {
#define CN_X_OP_ENUM(NAME, ...) CN_OP_##NAME,
    CN_OP_TABLE(CN_X_OP_ENUM)
#undef CN_X_OP_ENUM
    CN_OP_COUNT
} cn_op;

#define CN_MAX_INPUTS 6 /* ATTENTION_GRAD */

const char *cn_op_name(cn_op op);
int cn_op_arity(cn_op op);
int cn_op_differentiable(cn_op op);
/* 0 for LEAF and RESHAPE: the executor binds leaves and makes reshapes views. */
int cn_op_launches(cn_op op);
/* The table's dtype signature ("ff:f"), for messages and tests. */
const char *cn_op_dtypes(cn_op op);

/* Epilogue activation fused into a producing op by the planner (ADD and MATMUL honour it
 * on every backend; the unfused graph never sets it).
 * Fused bias: the planner may also fold ADD(MATMUL(a,b), bias) into a MATMUL launch with
 * n_in == 3, in[2] = bias of shape [N] (the output's last dim, 2-D MATMUL only): out =
 * op(a) op(b) + bias[col], then the epilogue. Backends accept it only through supports().
 * DWCONV takes the same (in[2] = bias [C], added to every pixel's channels, then the
 * epilogue): a depthwise layer's bias and ReLU6 in its one launch.
 * Fused residual of a product (planner.c, fuse_gemm_residual): a 2-D MATMUL with n_in == 4,
 * in[2] the bias as above and in[3] = r with the output's elements and row length (a
 * convolution's [N,OH,OW,C] for its [N*OH*OW, C] product): out = ((op(a) op(b) + bias) + r),
 * each sum rounded to float, then the epilogue: a residual block's ADD and ReLU after its
 * last convolution, bit for bit. r is never the output's buffer. Backends accept it only
 * through supports(), and only from CN_BACKEND_API_VERSION 5. */
/* The parameter-free activations of issue 16 are epilogues too; LEAKY_RELU, ELU and CLIP take
 * parameters that no GEMM or conv launch carries, so they stay separate launches, except
 * CLIP(0, 6), MobileNet's ReLU6, which is an epilogue of its own (CN_EPI_RELU6: min(max(x, 0),
 * 6), the same expression as CLIP's) because every inverted-residual block applies it twice;
 * cn_node_as_epilogue says which epilogue a node becomes. */
typedef enum cn_epilogue {
    CN_EPI_NONE = 0,
    CN_EPI_RELU,
    CN_EPI_SIGMOID,
    CN_EPI_TANH,
    CN_EPI_SILU,
    CN_EPI_HARD_SIGMOID,
    CN_EPI_HARD_SWISH,
    CN_EPI_SOFTPLUS,
    CN_EPI_RELU6,
    CN_EPI_COUNT
} cn_epilogue;

/* The optimizer's per-step block, the last input of ADAM and SGD: element CN_RATE_LR is the
 * step's learning rate (the schedule's value, cn_optimizer_lr_at), CN_RATE_GRAD_SCALE the
 * factor on every gradient (1, or clipping by global norm's scale from CLIP_SCALE). */
enum { CN_RATE_LR = 0, CN_RATE_GRAD_SCALE = 1, CN_RATE_LEN = 2 };

/* The fixed parameter block of a node. Which members an op reads is stated per op. */
/* The table's storage and epilogue columns; a fused bias is a 3-input MATMUL (see above). */
typedef enum cn_storage { CN_STORE_OWN = 0, CN_STORE_VIEW, CN_STORE_INPLACE } cn_storage;
cn_storage cn_op_storage(cn_op op);
int cn_op_takes_epilogue(cn_op op);
cn_epilogue cn_op_as_epilogue(cn_op op);
int cn_op_fused_bias(cn_op op, int n_in);
/* A 4-input LAYERNORM_GRAD: dx plus a residual gradient (see LAYERNORM_GRAD above); a
 * 4-input MATMUL: the product, its bias, then a residual (see the fused bias above). */
int cn_op_fused_residual(cn_op op, int n_in);

typedef struct cn_op_params {
    int32_t trans_a, trans_b;       /* MATMUL */
    int32_t kh, kw, sh, sw, ph, pw; /* IM2COL, COL2IM, MAXPOOL(_GRAD), AVGPOOL(_GRAD) */
    int32_t perm[6];                /* TRANSPOSE: out dim i = in dim perm[i] */
    int32_t epilogue;               /* cn_epilogue, see above */
    float alpha, beta;              /* SCALE: x*alpha+beta; EXPAND: alpha */
    float rate;                     /* DROPOUT(_GRAD) */
    uint32_t seed;                  /* DROPOUT(_GRAD) */
    float beta1, beta2, eps;        /* ADAM; LAYERNORM(_GRAD) uses eps */
    float weight_decay;             /* ADAM (L2 added to grad) / ADAMW (decoupled) / SGD */
    float momentum;                 /* SGD */
    int32_t decoupled;              /* ADAM: 1 = AdamW */
    int32_t nesterov;               /* SGD */
    float clip_value;               /* ADAM, SGD: clamp each gradient element (0: off) */
    float clip_norm;                /* CLIP_SCALE: the largest global norm */
    int32_t causal;                 /* ATTENTION(_LSE, _GRAD) */
    int32_t variant;                /* GELU, LAYERNORM_GRAD, ATTENTION_GRAD: see above; CAST: the
                                       cn_dtype converted to (f32, f16 or bf16) */
    float scale;                    /* ATTENTION(_LSE, _GRAD): score scale */
    float fill;                     /* CAUSAL_MASK, PAD */
    int32_t dh, dw;                 /* window dilation (0 reads as 1), see above */
    int32_t ph_extra, pw_extra;     /* window padding after minus before (asymmetric) */
    int32_t axis, before, after;    /* PAD, CONCAT */
    int32_t running;                /* BATCHNORM(_GRAD): 1 = normalise with the running statistics */
    int32_t ceil_mode;              /* pools: output size rounded up (cn_window_extent_ceil) */
    int32_t exclude_pad;            /* AVGPOOL(_GRAD): divide by the positions inside the image */
    int32_t a_win_h, a_win_w;       /* MATMUL folded with the IM2COL feeding it (planner.c, fuse_im2col):
                                       in[0]'s buffer is the NHWC image [n, a_win_h, a_win_w, c] that
                                       in_shape[0] is the window matrix of (kh, kw, sh, sw, and padding
                                       ph, pw, ph_extra, pw_extra; no dilation). 0: a plain matrix. Backends that do not read the
                                       image in place refuse such launches in supports(). */
    int32_t relu_mask;              /* MAXPOOL_GRAD folded with the RELU_GRAD after it (planner.c,
                                       fuse_pool_relu_grad): 1 = dx is also zeroed where x <= 0, i.e.
                                       RELU_GRAD(MAXPOOL_GRAD(dy, x), x) for x a ReLU's output, in
                                       one pass. Only a mask: the same bits as the two launches. */
} cn_op_params;

/* The epilogue a node of op with parameters p becomes when fused (the table's column, and
 * CN_EPI_RELU6 for CLIP(0, 6)); CN_EPI_NONE: never fused. */
cn_epilogue cn_node_as_epilogue(cn_op op, const cn_op_params *p);

/* STEPS' choice of the next token, and cn_generator_greedy's: the lowest index of the largest
 * of x[0..n) (a NaN never wins: comparisons with it are false). */
int64_t cn_argmax_first(const float *x, int64_t n);

typedef struct cn_shape {
    int ndim;
    int64_t d[CN_MAX_DIMS];
} cn_shape;

static inline int64_t cn_shape_numel(const cn_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->d[i];
    return n;
}
/* The most elements a tensor may have, 2^48: its bytes in any dtype, and sums of a few such
 * counts, fit in int64 and size_t with room to spare, so size arithmetic on a valid shape
 * cannot overflow. */
#define CN_MAX_NUMEL ((int64_t)1 << 48)
/* 1 and *numel when every dim is >= 1 and their product is at most CN_MAX_NUMEL (checked
 * without overflowing); else 0. The one test of "a shape that fits". */
int cn_shape_fits(const cn_shape *s, int64_t *numel);
cn_shape cn_shape_make(int ndim, const int64_t *d);
cn_shape cn_shape_of(int ndim, ...); /* int64_t dims */
int cn_shape_eq(const cn_shape *a, const cn_shape *b);
/* "[64,28,28,1]" into buf */
const char *cn_shape_str(const cn_shape *s, char *buf, size_t cap);
/* The broadcasting rule (see the top of this file): 1 if small broadcasts onto full. */
int cn_shape_broadcasts(const cn_shape *small, const cn_shape *full);

/* Geometry of a windowed op (IM2COL, COL2IM, DWCONV, pools) on an NHWC image:
 * OH = (H + ph + pb - (dh(kh-1)+1))/sh + 1, likewise OW; ph, pw pad before (top, left),
 * pb, pr after. */
typedef struct cn_window {
    int64_t n, h, w, c;
    int64_t oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t pb, pr, dh, dw;
} cn_window;
/* The one window rule, per axis: 1 and *out = (in + p0 + p1 - (d(k-1)+1))/s + 1 positions
 * when k, s, d >= 1, p0, p1 >= 0 and the dilated window fits the padded extent; else 0. */
int cn_window_span(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t d, int64_t *out);
/* cn_window_span with symmetric padding p and no dilation. */
int cn_window_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t *out);
/* The same with ceil true: PyTorch's ceil_mode, (in + 2p - k + s - 1)/s + 1 positions, less
 * the last when it would start past in + p (so every window starts inside the image or its
 * left padding); windows may then reach past the right padding, and kernels clip them to the
 * image. Pools pass p->ceil_mode; everything else rounds down. */
int cn_window_extent_ceil(int64_t in, int64_t k, int64_t s, int64_t p, int ceil, int64_t *out);
/* Average pooling's divisor for window (oh, ow): kh*kw clipped to the padded image (ceil mode's
 * last windows are smaller), or with exclude_pad the positions inside the image alone
 * (PyTorch's count_include_pad=False). kh*kw for every window unless one of the two is set. */
static inline int64_t cn_pool_divisor(const cn_window *g, int64_t oh, int64_t ow, int exclude_pad) {
    int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;
    int64_t h1 = h0 + g->kh < g->h + g->pb ? h0 + g->kh : g->h + g->pb;
    int64_t w1 = w0 + g->kw < g->w + g->pr ? w0 + g->kw : g->w + g->pr;
    if (exclude_pad) {
        h0 = h0 < 0 ? 0 : h0, w0 = w0 < 0 ? 0 : w0;
        h1 = h1 > g->h ? g->h : h1, w1 = w1 > g->w ? g->w : w1;
    }
    return (h1 - h0) * (w1 - w0);
}
/* 1 and g filled when img is 4-D, kernel and stride >= 1, padding >= 0 and the window fits
 * the padded image; else 0. */
int cn_window_of(const cn_shape *img, const cn_op_params *p, cn_window *g);
cn_shape cn_window_pooled(const cn_window *g);  /* [N, OH, OW, C] */
/* Along one axis: the output index o whose window reads input index i at kernel offset k
 * (o*stride - pad + k*dil == i), or -1 when no output window does. The one rule behind every
 * scatter-back (col2im, the depthwise input gradient). */
static inline int64_t cn_window_src(int64_t i, int64_t pad, int64_t k, int64_t dil, int64_t stride, int64_t n_out) {
    const int64_t t = i + pad - k * dil;
    return t < 0 || t % stride || t / stride >= n_out ? -1 : t / stride;
}
/* CN_ERR_SHAPE: "<op>: window ... does not fit image ..." with every geometry parameter. */
cn_status cn_window_fail(cn_op op, const cn_op_params *p, const cn_shape *img);
cn_shape cn_window_patches(const cn_window *g); /* [N*OH*OW, KH*KW*C] */

/* The output shape and dtype of op on these inputs. given is the shape the caller asks for
 * (required by RESHAPE, SUM_ROWS, EXPAND, COL2IM, AVGPOOL_GRAD; ignored by the others).
 * CN_ERR_INVALID_ARG (arity), CN_ERR_DTYPE or CN_ERR_SHAPE with the op, shapes and
 * parameters named. */
cn_status cn_op_infer(cn_op op, const cn_op_params *p, int n_in, const cn_shape *in, const cn_dtype *dt,
                      const cn_shape *given, cn_shape *out, cn_dtype *out_dt);
/* The whole contract of one launch as the planner builds it: cn_op_infer's rules with out as
 * the given shape, the output's dtype among the allowed ones, plus the fused forms (an
 * epilogue only where cn_op_takes_epilogue, a fused bias [N] only on a 2-D MATMUL). */
cn_status cn_op_check(cn_op op, const cn_op_params *p, int n_in, const cn_shape *in, const cn_dtype *dt,
                      const cn_shape *out, cn_dtype out_dt);

/* The layout and depthwise ops' shape rules (ops_layers.c): cn_op_infer's cases for the rules
 * PAD .. DWCONV_GRAD_W; CN_ERR_SHAPE naming the op, the shapes and the parameters. */
cn_status cn_op_infer_layers(cn_op op, const cn_op_params *p, const cn_shape *in, const cn_shape *given,
                             cn_shape *out);

/* The transformer ops' shape rules (ops_transformer.c): cn_op_infer's cases for the rules
 * NORM .. ATTENTION; CN_ERR_SHAPE naming the op and the shapes. Engine-internal. */
cn_status cn_op_infer_transformer(cn_op op, const cn_op_params *p, const cn_shape *in, const cn_shape *given,
                                  cn_shape *out);

/* The layer ops' shape rules (ops_norm_act.c): cn_op_infer's cases for the rules ACT ..
 * BN_FOLD. Engine-internal. */
cn_status cn_op_infer_norm_act(cn_op op, const cn_op_params *p, const cn_shape *in, const cn_shape *given,
                             cn_shape *out);
/* 1 for the activation ops of issue 16 (LEAKY_RELU .. SOFTPLUS): the ops ACT_GRAD differentiates. */
static inline int cn_op_is_activation(cn_op op) { return op >= CN_OP_LEAKY_RELU && op <= CN_OP_SOFTPLUS; }
/* Index rules of the layout ops, shared by the OpenMP reference and the tests (kernels_cl/resize.cl
 * states them again in OpenCL C, in the same float operations). */
/* PAD reflect: the source of padded position s (s - before) on an axis of d, without
 * repeating the edge (PyTorch's "reflect"); valid for -d < s < 2d - 1. */
static inline int64_t cn_reflect_index(int64_t s, int64_t d) { return s < 0 ? -s : s >= d ? 2 * (d - 1) - s : s; }
/* The positions of a reflect-padded axis (length dout) that come from source j (axis of d),
 * in increasing order, into src[3]; returns how many. */
static inline int cn_reflect_sources(int64_t j, int64_t d, int64_t before, int64_t dout, int64_t *src) {
    int n = 0;
    if (j >= 1 && j <= before) src[n++] = before - j;
    src[n++] = before + j;
    if (j <= d - 2 && before + 2 * (d - 1) - j < dout) src[n++] = before + 2 * (d - 1) - j;
    return n;
}
/* UPSAMPLE: output position o of an axis upsampled s times from n reads sources i0, i1 with
 * weights w0, w1 (nearest: i0 = i1 = o/s, 1 and 0; bilinear, align_corners=False: PyTorch's
 * source coordinate (o + 0.5)/s - 0.5 clamped at 0, i1 = i0 + 1 clamped to the edge). */
typedef struct cn_up_tap {
    int64_t i0, i1;
    float w0, w1;
} cn_up_tap;
static inline cn_up_tap cn_up_tap_of(int64_t o, int s, int64_t n, int bilinear) {
    cn_up_tap t;
    if (!bilinear) {
        t.i0 = t.i1 = o / s, t.w0 = 1.0f, t.w1 = 0.0f;
        return t;
    }
    const float scale = 1.0f / (float)s;
    float src = scale * ((float)o + 0.5f) - 0.5f;
    if (src < 0.0f) src = 0.0f;
    t.i0 = (int64_t)src;
    t.i1 = t.i0 + (t.i0 < n - 1 ? 1 : 0);
    t.w1 = src - (float)t.i0;
    t.w0 = 1.0f - t.w1;
    return t;
}
/* The weight tap t gives source i (both taps summed where they coincide at the edge). */
static inline float cn_up_weight(cn_up_tap t, int64_t i) {
    return (t.i0 == i ? t.w0 : 0.0f) + (t.i1 == i ? t.w1 : 0.0f);
}
/* The output positions [lo, hi) whose taps may reach source i (a superset; the others weigh 0). */
static inline void cn_up_range(int64_t i, int s, int64_t n, int bilinear, int64_t *lo, int64_t *hi) {
    *lo = bilinear ? (i >= 1 ? (i - 1) * s : 0) : i * s;
    *hi = bilinear ? ((i + 2) * s < n * s ? (i + 2) * s : n * s) : (i + 1) * s;
}

/* Counter-based generator shared by every backend (also written in kernels_cl/common.h.cl):
 * splitmix64 of (seed, step, index), identical numbers everywhere. */
static inline uint64_t cn_rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline uint64_t cn_rng_u64(uint64_t seed, uint64_t step, uint64_t index) {
    return cn_rng_mix64(seed * 0x9E3779B97F4A7C15ULL + cn_rng_mix64(step * 0xD1B54A32D192ED03ULL + index + 1));
}
/* Uniform in [0,1) with 24 bits, exactly representable in f32. */
static inline float cn_rng_uniform(uint64_t seed, uint64_t step, uint64_t index) {
    return (float)(cn_rng_u64(seed, step, index) >> 40) * (1.0f / 16777216.0f);
}

#endif
