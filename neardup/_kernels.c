/* neardup's compiled loops: separators, shingle hashing, signatures, bands, set sizes and
 * similarities, and the band self-join.
 *
 * Every function works over whole batches in flat arrays (numpy arrays, through the buffer
 * protocol); the Python callers in neardup.fingerprint and neardup.selfjoin allocate the outputs
 * and check the types, so these loops only compute. Plain C with nothing but Python.h: a module
 * that loads in a millisecond, where a JIT compiler costs every process a second at start-up.
 *
 * All integer arithmetic is on uint64_t and wraps modulo 2**64 on purpose (the hashes are
 * polynomials and multiply-shift maps); floating point keeps its written order (built with
 * -ffp-contract=off), so a similarity is the same bits wherever it is computed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MULTIPLIER 0x9E3779B97F4A7C15ULL /* odd 64-bit constant for combining token hashes */
#define MASK32 0xFFFFFFFFULL
#define EMPTY_BIN (1ULL << 32) /* above every 32-bit value */

/* MurmurHash3's 64-bit finaliser: a bijection that spreads every input bit over the output. */
static inline uint64_t fmix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 33);
}

/* Map the high 32 bits of h onto [0, num_bins) by multiply-shift. */
static inline uint64_t bin_of(uint64_t h, uint64_t num_bins) { return ((h >> 32) * num_bins) >> 32; }

/* Release every buffer PyArg_ParseTuple filled (the NULL-terminated list of them). */
static void release(Py_buffer **buffers) {
    for (; *buffers; buffers++) PyBuffer_Release(*buffers);
}

/* --- normalisation ----------------------------------------------------------------------- */

/* collapse_separators(codes u32, offsets i64, is_separator bool, out u32, out_offsets i64,
 * words i64) -> written. Each text's runs of separators become one space between words, none
 * at either end; out_offsets[0] and words must be zero on entry. */
static PyObject *collapse_separators(PyObject *self, PyObject *args) {
    Py_buffer codes_b, offsets_b, table_b, out_b, out_offsets_b, words_b;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*w*", &codes_b, &offsets_b, &table_b, &out_b,
                          &out_offsets_b, &words_b))
        return NULL;
    const uint32_t *codes = codes_b.buf;
    const int64_t *offsets = offsets_b.buf;
    const uint8_t *is_separator = table_b.buf;
    uint32_t *out = out_b.buf;
    int64_t *out_offsets = out_offsets_b.buf, *words = words_b.buf;
    Py_ssize_t texts = offsets_b.len / 8 - 1, written = 0;
    for (Py_ssize_t t = 0; t < texts; t++) {
        Py_ssize_t start = written;
        int gap = 0;
        for (int64_t i = offsets[t]; i < offsets[t + 1]; i++) {
            uint32_t code = codes[i];
            if (is_separator[code]) {
                gap = 1;
                continue;
            }
            if (gap && written > start) {
                out[written++] = 32;
                words[t]++;
            }
            gap = 0;
            out[written++] = code;
        }
        out_offsets[t + 1] = written;
        words[t] += written > start;
    }
    Py_buffer *all[] = {&codes_b, &offsets_b, &table_b, &out_b, &out_offsets_b, &words_b, NULL};
    release(all);
    return PyLong_FromSsize_t(written);
}

/* --- signatures ------------------------------------------------------------------------- */

/* Optimal densification: an empty bin takes the value of the first non-empty bin on its own
 * fixed probe sequence. */
static void densify(const uint64_t *minima, uint32_t *signature, uint64_t k, uint64_t seed) {
    for (uint64_t b = 0; b < k; b++) {
        if (minima[b] != EMPTY_BIN) {
            signature[b] = (uint32_t)minima[b];
            continue;
        }
        for (uint64_t attempt = 1;; attempt++) {
            uint64_t probe = bin_of(fmix64((b << 32) ^ attempt ^ (seed << 48)), k);
            if (minima[probe] != EMPTY_BIN) {
                signature[b] = (uint32_t)minima[probe];
                break;
            }
        }
    }
}

/* sketch(tokens u64, offsets i64, size, seed, num_hashes, bands, hash_offsets i64, hashes u64,
 * signatures u32 [texts x num_hashes, zeroed], band_hashes u64 [texts x bands]).
 *
 * A shingle is `size` consecutive tokens (all of a shorter, non-empty text), hashed by
 * multiply-add combining and fmix64. Multiply-add combining is a polynomial in the tokens, so
 * each window's value follows from the previous one in two multiplications (a rolling hash)
 * whatever the shingle size. The hash's high 32 bits pick one of num_hashes bins and its low 32
 * bits are the value; each bin keeps its minimum. A band hashes its rows' values. hash_offsets
 * gives each text's number of shingles (the caller computes them from the lengths). */
static PyObject *sketch(PyObject *self, PyObject *args) {
    Py_buffer tokens_b, offsets_b, hash_offsets_b, hashes_b, signatures_b, bands_b;
    Py_ssize_t size, num_hashes, bands;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*y*nKnny*w*w*w*", &tokens_b, &offsets_b, &size, &seed,
                          &num_hashes, &bands, &hash_offsets_b, &hashes_b, &signatures_b,
                          &bands_b))
        return NULL;
    Py_buffer *all[] = {&tokens_b, &offsets_b, &hash_offsets_b, &hashes_b,
                        &signatures_b, &bands_b, NULL};
    uint64_t *minima = PyMem_Malloc(num_hashes * sizeof(uint64_t));
    if (!minima) {
        release(all);
        return PyErr_NoMemory();
    }
    const uint64_t *tokens = tokens_b.buf;
    const int64_t *offsets = offsets_b.buf, *hash_offsets = hash_offsets_b.buf;
    uint64_t *hashes = hashes_b.buf, *band_hashes = bands_b.buf;
    uint32_t *signatures = signatures_b.buf;
    Py_ssize_t texts = offsets_b.len / 8 - 1, rows = num_hashes / bands;
    uint64_t k = (uint64_t)num_hashes;
    for (Py_ssize_t t = 0; t < texts; t++) {
        int64_t start = offsets[t], length = offsets[t + 1] - offsets[t];
        int64_t width = length < size ? length : size;
        int64_t count = hash_offsets[t + 1] - hash_offsets[t];
        uint64_t top = 1; /* M ** width: the weight of the token leaving the window */
        for (int64_t i = 0; i < width; i++) top *= MULTIPLIER;
        /* Rolling one token on: h * M - (leaving + 1) * top + (entering + 1) + seed*top*(1 - M) */
        uint64_t drift = seed * top * (1 - MULTIPLIER), h = seed;
        for (Py_ssize_t b = 0; b < num_hashes; b++) minima[b] = EMPTY_BIN;
        for (int64_t j = start; j < start + width; j++) h = h * MULTIPLIER + tokens[j] + 1;
        uint64_t *out = hashes + hash_offsets[t];
        for (int64_t w = 0; w < count; w++) {
            if (w) {
                h = h * MULTIPLIER - (tokens[start + w - 1] + 1) * top;
                h += tokens[start + w + width - 1] + 1 + drift;
            }
            uint64_t mixed = fmix64(h), value = mixed & MASK32, b = bin_of(mixed, k);
            out[w] = mixed;
            if (value < minima[b]) minima[b] = value;
        }
        uint32_t *signature = signatures + t * num_hashes;
        if (count) densify(minima, signature, k, seed);
        for (Py_ssize_t band = 0; band < bands; band++) {
            uint64_t bh = (uint64_t)band + (seed << 32);
            for (Py_ssize_t r = band * rows; r < band * rows + rows; r++)
                bh = bh * MULTIPLIER + signature[r] + 1;
            band_hashes[t * bands + band] = fmix64(bh);
        }
    }
    PyMem_Free(minima);
    release(all);
    Py_RETURN_NONE;
}

/* --- shingle sets ------------------------------------------------------------------------ */

static void insertion_sort(uint64_t *a, Py_ssize_t n) {
    for (Py_ssize_t i = 1; i < n; i++) {
        uint64_t v = a[i];
        Py_ssize_t j = i;
        for (; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* Quicksort (median of three, recursing into the smaller side) with insertion sort for short
 * runs: the sets are a few hundred well-mixed hashes each. */
static void sort_u64(uint64_t *a, Py_ssize_t n) {
    while (n > 16) {
        uint64_t x = a[0], y = a[n / 2], z = a[n - 1];
        uint64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        Py_ssize_t i = -1, j = n;
        for (;;) {
            do i++; while (a[i] < pivot);
            do j--; while (a[j] > pivot);
            if (i >= j) break;
            uint64_t tmp = a[i];
            a[i] = a[j];
            a[j] = tmp;
        }
        Py_ssize_t left = j + 1; /* Hoare: a[0..j] <= pivot <= a[j+1..n) */
        if (left < n - left) {
            sort_u64(a, left);
            a += left;
            n -= left;
        } else {
            sort_u64(a + left, n - left);
            n = left;
        }
    }
    insertion_sort(a, n);
}

/* sorted_unique_segments(hashes u64 (sorted in place), offsets i64, out u64, out_offsets i64)
 * -> written. Sorts each segment and drops repeats. */
static PyObject *sorted_unique_segments(PyObject *self, PyObject *args) {
    Py_buffer hashes_b, offsets_b, out_b, out_offsets_b;
    if (!PyArg_ParseTuple(args, "w*y*w*w*", &hashes_b, &offsets_b, &out_b, &out_offsets_b))
        return NULL;
    uint64_t *hashes = hashes_b.buf, *out = out_b.buf;
    const int64_t *offsets = offsets_b.buf;
    int64_t *out_offsets = out_offsets_b.buf;
    Py_ssize_t segments = offsets_b.len / 8 - 1, written = 0;
    for (Py_ssize_t s = 0; s < segments; s++) {
        uint64_t *segment = hashes + offsets[s];
        Py_ssize_t n = offsets[s + 1] - offsets[s];
        sort_u64(segment, n);
        for (Py_ssize_t i = 0; i < n; i++)
            if (i == 0 || segment[i] != segment[i - 1]) out[written++] = segment[i];
        out_offsets[s + 1] = written;
    }
    Py_buffer *all[] = {&hashes_b, &offsets_b, &out_b, &out_offsets_b, NULL};
    release(all);
    return PyLong_FromSsize_t(written);
}

/* How many values two sorted unique arrays share, and (when weights are given) the sum of the
 * products of the shared values' weights: one merge for both similarities. */
static Py_ssize_t merge(const uint64_t *a, Py_ssize_t na, const uint64_t *b, Py_ssize_t nb,
                        const double *wa, const double *wb, double *weight) {
    Py_ssize_t i = 0, j = 0, shared = 0;
    double sum = 0.0;
    while (i < na && j < nb) {
        if (a[i] < b[j])
            i++;
        else if (a[i] > b[j])
            j++;
        else {
            if (wa) sum += wa[i] * wb[j];
            shared++, i++, j++;
        }
    }
    if (weight) *weight = sum;
    return shared;
}

/* shared_count(a u64, b u64) -> how many values two sorted unique arrays share. */
static PyObject *shared_count(PyObject *self, PyObject *args) {
    Py_buffer a_b, b_b;
    if (!PyArg_ParseTuple(args, "y*y*", &a_b, &b_b)) return NULL;
    Py_ssize_t shared = merge(a_b.buf, a_b.len / 8, b_b.buf, b_b.len / 8, NULL, NULL, NULL);
    Py_buffer *all[] = {&a_b, &b_b, NULL};
    release(all);
    return PyLong_FromSsize_t(shared);
}

/* pair_jaccards(hashes u64, offsets i64, left i64, right i64, out f64): exact Jaccard of the
 * distinct values of segments left[i] and right[i].
 *
 * One open-addressing table per pair instead of sorting every set: the values are already
 * well-mixed 64-bit hashes, so their low bits index the table. A slot belongs to the current
 * pair when its stamp says so, which spares clearing the table between pairs. */
static PyObject *pair_jaccards(PyObject *self, PyObject *args) {
    Py_buffer hashes_b, offsets_b, left_b, right_b, out_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &hashes_b, &offsets_b, &left_b, &right_b, &out_b))
        return NULL;
    Py_buffer *all[] = {&hashes_b, &offsets_b, &left_b, &right_b, &out_b, NULL};
    const uint64_t *hashes = hashes_b.buf;
    const int64_t *offsets = offsets_b.buf, *left = left_b.buf, *right = right_b.buf;
    double *out = out_b.buf;
    Py_ssize_t segments = offsets_b.len / 8 - 1, pairs = left_b.len / 8, longest = 1;
    for (Py_ssize_t s = 0; s < segments; s++)
        if (offsets[s + 1] - offsets[s] > longest) longest = offsets[s + 1] - offsets[s];
    uint64_t capacity = 1;
    while (capacity < 4 * (uint64_t)longest) capacity *= 2;
    uint64_t *keys = PyMem_Malloc(capacity * sizeof(uint64_t));
    int64_t *stamps = PyMem_Calloc(capacity, sizeof(int64_t));
    uint8_t *sides = PyMem_Calloc(capacity, 1); /* bit 1: in the left set, bit 2: in the right */
    if (!keys || !stamps || !sides) {
        PyMem_Free(keys), PyMem_Free(stamps), PyMem_Free(sides);
        release(all);
        return PyErr_NoMemory();
    }
    uint64_t mask = capacity - 1;
    for (Py_ssize_t p = 0; p < pairs; p++) {
        int64_t stamp = p + 1, counts[3] = {0, 0, 0}; /* left size, right size, shared */
        int64_t segment_of[2] = {left[p], right[p]};
        for (int side = 1; side <= 2; side++) {
            int64_t segment = segment_of[side - 1];
            for (int64_t i = offsets[segment]; i < offsets[segment + 1]; i++) {
                uint64_t h = hashes[i], slot = h & mask;
                while (stamps[slot] == stamp && keys[slot] != h) slot = (slot + 1) & mask;
                if (stamps[slot] != stamp) stamps[slot] = stamp, keys[slot] = h, sides[slot] = 0;
                if (!(sides[slot] & side)) {
                    counts[side - 1]++;
                    counts[2] += side == 2 && sides[slot] == 1;
                    sides[slot] |= side;
                }
            }
        }
        int64_t total = counts[0] + counts[1] - counts[2];
        out[p] = total ? (double)counts[2] / (double)total : 1.0;
    }
    PyMem_Free(keys), PyMem_Free(stamps), PyMem_Free(sides);
    release(all);
    Py_RETURN_NONE;
}

/* Cosine of two shingle sets whose shingles weigh their IDF; 1.0 for two empty sets. */
static double weighted(const uint64_t *a, const double *wa, Py_ssize_t na, const uint64_t *b,
                       const double *wb, Py_ssize_t nb) {
    double norm_a = 0.0, norm_b = 0.0, shared;
    for (Py_ssize_t i = 0; i < na; i++) norm_a += wa[i] * wa[i];
    for (Py_ssize_t j = 0; j < nb; j++) norm_b += wb[j] * wb[j];
    if (norm_a == 0.0 || norm_b == 0.0) return na == 0 && nb == 0 ? 1.0 : 0.0;
    merge(a, na, b, nb, wa, wb, &shared);
    double cosine = shared / sqrt(norm_a * norm_b);
    return cosine < 1.0 ? cosine : 1.0;
}

/* weighted_similarity(a u64, wa f64, b u64, wb f64) -> float. */
static PyObject *weighted_similarity(PyObject *self, PyObject *args) {
    Py_buffer a_b, wa_b, b_b, wb_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &a_b, &wa_b, &b_b, &wb_b)) return NULL;
    double result = weighted(a_b.buf, wa_b.buf, a_b.len / 8, b_b.buf, wb_b.buf, b_b.len / 8);
    Py_buffer *all[] = {&a_b, &wa_b, &b_b, &wb_b, NULL};
    release(all);
    return PyFloat_FromDouble(result);
}

/* weighted_pairs(sets u64, weights f64, offsets i64, left i64, right i64, out f64):
 * weighted_similarity of segments left[i] and right[i] for many pairs at once. */
static PyObject *weighted_pairs(PyObject *self, PyObject *args) {
    Py_buffer sets_b, weights_b, offsets_b, left_b, right_b, out_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*", &sets_b, &weights_b, &offsets_b, &left_b,
                          &right_b, &out_b))
        return NULL;
    const uint64_t *sets = sets_b.buf;
    const double *weights = weights_b.buf;
    const int64_t *offsets = offsets_b.buf, *left = left_b.buf, *right = right_b.buf;
    double *out = out_b.buf;
    for (Py_ssize_t p = 0; p < left_b.len / 8; p++) {
        int64_t a = offsets[left[p]], b = offsets[right[p]];
        out[p] = weighted(sets + a, weights + a, offsets[left[p] + 1] - a, sets + b, weights + b,
                          offsets[right[p] + 1] - b);
    }
    Py_buffer *all[] = {&sets_b, &weights_b, &offsets_b, &left_b, &right_b, &out_b, NULL};
    release(all);
    Py_RETURN_NONE;
}

/* --- the band self-join ------------------------------------------------------------------ */

/* bucket_pairs(keys i64, groups i32, out i64 or None) -> pairs. Given (key, group) sorted by key
 * then group, every pair of groups in each bucket, once per bucket, coded as
 * low * 2**32 + high. With out None, only counts them (so the caller can check its budget and
 * allocate). */
static PyObject *bucket_pairs(PyObject *self, PyObject *args) {
    Py_buffer keys_b, groups_b, out_b = {0};
    PyObject *out_object;
    if (!PyArg_ParseTuple(args, "y*y*O", &keys_b, &groups_b, &out_object)) return NULL;
    if (out_object != Py_None && PyObject_GetBuffer(out_object, &out_b, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&keys_b), PyBuffer_Release(&groups_b);
        return NULL;
    }
    const int64_t *keys = keys_b.buf;
    const int32_t *groups = groups_b.buf;
    int64_t *out = out_b.buf;
    Py_ssize_t n = keys_b.len / 8, start = 0;
    long long written = 0;
    for (Py_ssize_t i = 1; i <= n; i++) {
        if (i < n && keys[i] == keys[start]) continue;
        if (out)
            for (Py_ssize_t a = start; a < i; a++)
                for (Py_ssize_t b = a + 1; b < i; b++)
                    out[written++] = ((int64_t)groups[a] << 32) | (int64_t)groups[b];
        else
            written += (long long)(i - start) * (i - start - 1) / 2;
        start = i;
    }
    Py_buffer *all[] = {&keys_b, &groups_b, out ? &out_b : NULL, NULL};
    release(all);
    return PyLong_FromLongLong(written);
}

static PyMethodDef methods[] = {
    {"collapse_separators", collapse_separators, METH_VARARGS, NULL},
    {"sketch", sketch, METH_VARARGS, NULL},
    {"sorted_unique_segments", sorted_unique_segments, METH_VARARGS, NULL},
    {"shared_count", shared_count, METH_VARARGS, NULL},
    {"pair_jaccards", pair_jaccards, METH_VARARGS, NULL},
    {"weighted_similarity", weighted_similarity, METH_VARARGS, NULL},
    {"weighted_pairs", weighted_pairs, METH_VARARGS, NULL},
    {"bucket_pairs", bucket_pairs, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "neardup's compiled loops (see _kernels.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
