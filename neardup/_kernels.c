/* neardup's compiled loops: case folding, separators, shingle hashing, signatures, bands, MD5s,
 * set sizes and similarities, the band self-join and word edit distances.
 *
 * Every function works over whole batches in flat arrays (numpy arrays, through the buffer
 * protocol); the Python callers in neardup.fingerprint and neardup.selfjoin allocate the outputs
 * and check the types, so these loops only compute. Plain C with nothing but Python.h: a module
 * that loads in a millisecond, where a JIT compiler costs every process a second at start-up.
 * The fingerprinting loops (folding, collapsing, the sketch, the MD5s) release the GIL, so that
 * the indexer's writer thread stores one batch while the next is fingerprinted.
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

/* The length of the longest of `items` items laid end to end at `offsets`. */
static int64_t longest_item(const int64_t *offsets, Py_ssize_t items) {
    int64_t longest = 0;
    for (Py_ssize_t t = 0; t < items; t++)
        if (offsets[t + 1] - offsets[t] > longest) longest = offsets[t + 1] - offsets[t];
    return longest;
}

/* Release every buffer PyArg_ParseTuple filled (the NULL-terminated list of them). */
static void release(Py_buffer **buffers) {
    for (; *buffers; buffers++) PyBuffer_Release(*buffers);
}

/* Releases the buffers and ends a call that checks its arguments: with ValueError(refused) where
 * a check refused them, else (`refused` NULL) with MemoryError, an allocation having failed. */
static PyObject *refuse(Py_buffer **buffers, const char *refused) {
    release(buffers);
    if (refused)
        PyErr_SetString(PyExc_ValueError, refused);
    else
        PyErr_NoMemory();
    return NULL;
}

/* `items` values of 8 bytes as a bytes object. */
static PyObject *as_bytes(const void *data, Py_ssize_t items) {
    return PyBytes_FromStringAndSize(data, items * 8);
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
    Py_BEGIN_ALLOW_THREADS
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
    Py_END_ALLOW_THREADS
    Py_buffer *all[] = {&codes_b, &offsets_b, &table_b, &out_b, &out_offsets_b, &words_b, NULL};
    release(all);
    return PyLong_FromSsize_t(written);
}

/* code_points(texts list[str], offsets i64, out u32): every text's code points, text after text,
 * read from the strings' own storage (1, 2 or 4 bytes a character): what joining them and
 * encoding the whole as UTF-32 gives, without the joined copy or the codec. */
static PyObject *code_points(PyObject *self, PyObject *args) {
    PyObject *texts;
    Py_buffer offsets_b, out_b;
    if (!PyArg_ParseTuple(args, "O!y*w*", &PyList_Type, &texts, &offsets_b, &out_b)) return NULL;
    const int64_t *offsets = offsets_b.buf;
    uint32_t *out = out_b.buf;
    Py_buffer *all[] = {&offsets_b, &out_b, NULL};
    Py_ssize_t count = PyList_GET_SIZE(texts);
    if (offsets_b.len / 8 != count + 1 || out_b.len / 4 < offsets[count]) {
        release(all);
        PyErr_SetString(PyExc_ValueError, "code_points: offsets or output do not fit the texts");
        return NULL;
    }
    for (Py_ssize_t t = 0; t < count; t++) {
        PyObject *text = PyList_GET_ITEM(texts, t);
#if PY_VERSION_HEX < 0x030C0000 /* before 3.12 a string made by the old API may not be ready */
        if (PyUnicode_Check(text) && PyUnicode_READY(text) < 0) {
            release(all);
            return NULL;
        }
#endif
        if (!PyUnicode_Check(text) || PyUnicode_GET_LENGTH(text) != offsets[t + 1] - offsets[t]) {
            release(all);
            PyErr_SetString(PyExc_TypeError, "code_points: texts must be the strings measured");
            return NULL;
        }
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        const void *data = PyUnicode_DATA(text);
        uint32_t *to = out + offsets[t];
        switch (PyUnicode_KIND(text)) {
        case PyUnicode_1BYTE_KIND:
            for (Py_ssize_t i = 0; i < length; i++) to[i] = ((const Py_UCS1 *)data)[i];
            break;
        case PyUnicode_2BYTE_KIND:
            for (Py_ssize_t i = 0; i < length; i++) to[i] = ((const Py_UCS2 *)data)[i];
            break;
        default:
            memcpy(to, data, length * 4);
        }
    }
    release(all);
    Py_RETURN_NONE;
}

/* strings(codes u32, offsets i64) -> list[str]: each text of a joined array of code points as a
 * string, made straight from its slice. */
static PyObject *strings(PyObject *self, PyObject *args) {
    Py_buffer codes_b, offsets_b;
    if (!PyArg_ParseTuple(args, "y*y*", &codes_b, &offsets_b)) return NULL;
    const uint32_t *codes = codes_b.buf;
    const int64_t *offsets = offsets_b.buf;
    Py_ssize_t count = offsets_b.len / 8 - 1;
    PyObject *result = PyList_New(count);
    for (Py_ssize_t t = 0; result && t < count; t++) {
        PyObject *text = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, codes + offsets[t],
                                                   offsets[t + 1] - offsets[t]);
        if (!text) Py_CLEAR(result);
        else PyList_SET_ITEM(result, t, text);
    }
    Py_buffer *all[] = {&codes_b, &offsets_b, NULL};
    release(all);
    return result;
}

/* --- MD5 (RFC 1321) of each text's UTF-8 -------------------------------------------------- */

static uint32_t md5_k[64]; /* floor(|sin(i + 1)| * 2**32), filled when the module loads */
static const uint8_t MD5_SHIFTS[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                       5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                       4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                       6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static void md5_block(uint32_t state[4], const uint8_t block[64]) {
    uint32_t w[16], a = state[0], b = state[1], c = state[2], d = state[3];
    for (int i = 0; i < 16; i++)
        w[i] = block[4 * i] | (uint32_t)block[4 * i + 1] << 8 | (uint32_t)block[4 * i + 2] << 16 |
               (uint32_t)block[4 * i + 3] << 24;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) f = (b & c) | (~b & d), g = i;
        else if (i < 32) f = (d & b) | (~d & c), g = (5 * i + 1) & 15;
        else if (i < 48) f = b ^ c ^ d, g = (3 * i + 5) & 15;
        else f = c ^ (b | ~d), g = (7 * i) & 15;
        f += a + md5_k[i] + w[g];
        a = d, d = c, c = b;
        b += f << MD5_SHIFTS[i] | f >> (32 - MD5_SHIFTS[i]);
    }
    state[0] += a, state[1] += b, state[2] += c, state[3] += d;
}

/* The UTF-8 of code points into out (room for 4 a code point); its length, or -1 when one is a
 * surrogate, which UTF-8 cannot hold. */
static int64_t utf8(const uint32_t *codes, int64_t count, uint8_t *out) {
    uint8_t *at = out;
    for (int64_t i = 0; i < count; i++) {
        uint32_t c = codes[i];
        if (c < 0x80) {
            *at++ = (uint8_t)c;
        } else if (c < 0x800) {
            *at++ = 0xC0 | c >> 6, *at++ = 0x80 | (c & 0x3F);
        } else if (c < 0x10000) {
            if (c >= 0xD800 && c < 0xE000) return -1;
            *at++ = 0xE0 | c >> 12, *at++ = 0x80 | (c >> 6 & 0x3F), *at++ = 0x80 | (c & 0x3F);
        } else {
            *at++ = 0xF0 | c >> 18, *at++ = 0x80 | (c >> 12 & 0x3F);
            *at++ = 0x80 | (c >> 6 & 0x3F), *at++ = 0x80 | (c & 0x3F);
        }
    }
    return at - out;
}

/* The MD5 of bytes[0, length), padded in place: bytes has 72 spare bytes past length. */
static void md5(uint8_t *bytes, int64_t length, uint8_t digest[16]) {
    uint32_t state[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
    uint64_t bits = (uint64_t)length * 8;
    int64_t padded = (length + 8) / 64 * 64 + 64;
    bytes[length] = 0x80;
    memset(bytes + length + 1, 0, padded - length - 9);
    for (int i = 0; i < 8; i++) bytes[padded - 8 + i] = (uint8_t)(bits >> (8 * i));
    for (int64_t at = 0; at < padded; at += 64) md5_block(state, bytes + at);
    for (int i = 0; i < 16; i++) digest[i] = (uint8_t)(state[i / 4] >> (8 * (i % 4)));
}

/* Each of the texts' MD5 (of its UTF-8, as hashlib gives it) into digests, 16 bytes a text,
 * computed without the GIL from the code points the caller holds already; -1 with a Python
 * error (ValueError for a text holding a surrogate, which UTF-8 cannot encode) on failure. */
static int md5_texts(const uint32_t *codes, const int64_t *offsets, Py_ssize_t texts,
                     uint8_t *digests) {
    uint8_t *bytes = PyMem_Malloc(4 * longest_item(offsets, texts) + 72);
    if (!bytes) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < texts && bad < 0; t++) {
        int64_t length = utf8(codes + offsets[t], offsets[t + 1] - offsets[t], bytes);
        if (length < 0) bad = t;
        else md5(bytes, length, digests + 16 * t);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(bytes);
    if (bad < 0) return 0;
    PyErr_Format(PyExc_ValueError, "text %zd holds a surrogate, which UTF-8 cannot encode", bad);
    return -1;
}

/* md5_digests(codes u32, offsets i64, digests u8 [16 * texts]): each text's MD5 digest. */
static PyObject *md5_digests(PyObject *self, PyObject *args) {
    Py_buffer codes_b, offsets_b, digests_b;
    if (!PyArg_ParseTuple(args, "y*y*w*", &codes_b, &offsets_b, &digests_b)) return NULL;
    Py_buffer *all[] = {&codes_b, &offsets_b, &digests_b, NULL};
    int failed = md5_texts(codes_b.buf, offsets_b.buf, offsets_b.len / 8 - 1, digests_b.buf);
    release(all);
    if (failed) return NULL;
    Py_RETURN_NONE;
}

/* md5_hex(codes u32, offsets i64) -> list[str]: each text's MD5, as hashlib's hexdigest. */
static PyObject *md5_hex(PyObject *self, PyObject *args) {
    Py_buffer codes_b, offsets_b;
    if (!PyArg_ParseTuple(args, "y*y*", &codes_b, &offsets_b)) return NULL;
    Py_buffer *all[] = {&codes_b, &offsets_b, NULL};
    Py_ssize_t texts = offsets_b.len / 8 - 1;
    uint8_t *digests = PyMem_Malloc(16 * (texts ? texts : 1));
    PyObject *result = NULL;
    if (!digests) PyErr_NoMemory();
    else if (md5_texts(codes_b.buf, offsets_b.buf, texts, digests) == 0 &&
             (result = PyList_New(texts))) {
        static const char hex[] = "0123456789abcdef";
        for (Py_ssize_t t = 0; t < texts; t++) {
            char text[32];
            for (int i = 0; i < 16; i++)
                text[2 * i] = hex[digests[16 * t + i] >> 4], text[2 * i + 1] = hex[digests[16 * t + i] & 15];
            PyObject *item = PyUnicode_FromStringAndSize(text, 32);
            if (!item) {
                Py_CLEAR(result);
                break;
            }
            PyList_SET_ITEM(result, t, item);
        }
    }
    PyMem_Free(digests);
    release(all);
    return result;
}

/* all_marked(codes u32, marked bool) -> bool: whether marked[code] holds for every code. */
static PyObject *all_marked(PyObject *self, PyObject *args) {
    Py_buffer codes_b, marked_b;
    if (!PyArg_ParseTuple(args, "y*y*", &codes_b, &marked_b)) return NULL;
    const uint32_t *codes = codes_b.buf;
    const uint8_t *marked = marked_b.buf;
    Py_ssize_t count = codes_b.len / 4;
    uint8_t all = 1;
    for (Py_ssize_t i = 0; i < count; i++) all &= marked[codes[i]];
    Py_buffer *buffers[] = {&codes_b, &marked_b, NULL};
    release(buffers);
    return PyBool_FromLong(all);
}

/* fold_case(codes u32, offsets i64, fold u32, expansions u32, out_offsets i64, unfoldable bool)
 * -> bytes: each text's code points as the fold table gives them, as uint32 bytes, with each
 * text's offsets into them; out_offsets[0] must be zero. An entry is a code point, or
 * EXPANDS | i for the expansions[i] code points at expansions[i + 1...]; a text holding a code
 * point whose entry is 0 is marked unfoldable and has none, for the caller to normalise
 * otherwise. Two passes: lengths, then code points. */
#define EXPANDS 0x80000000U
static PyObject *fold_case(PyObject *self, PyObject *args) {
    Py_buffer codes_b, offsets_b, fold_b, expansions_b, out_offsets_b, unfoldable_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*w*", &codes_b, &offsets_b, &fold_b, &expansions_b,
                          &out_offsets_b, &unfoldable_b))
        return NULL;
    const uint32_t *codes = codes_b.buf, *fold = fold_b.buf, *expansions = expansions_b.buf;
    const int64_t *offsets = offsets_b.buf;
    int64_t *out_offsets = out_offsets_b.buf;
    uint8_t *unfoldable = unfoldable_b.buf;
    Py_ssize_t texts = offsets_b.len / 8 - 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < texts; t++) {
        int64_t length = 0;
        for (int64_t i = offsets[t]; i < offsets[t + 1]; i++) {
            uint32_t entry = fold[codes[i]];
            if (!entry) {
                unfoldable[t] = 1;
                length = 0;
                break;
            }
            length += entry & EXPANDS ? expansions[entry & ~EXPANDS] : 1;
        }
        out_offsets[t + 1] = out_offsets[t] + length;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = PyBytes_FromStringAndSize(NULL, out_offsets[texts] * 4);
    if (result) {
        uint32_t *out = (uint32_t *)PyBytes_AS_STRING(result);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t t = 0; t < texts; t++) {
            if (unfoldable[t]) continue;
            for (int64_t i = offsets[t]; i < offsets[t + 1]; i++) {
                uint32_t entry = fold[codes[i]];
                if (entry & EXPANDS) {
                    const uint32_t *expansion = expansions + (entry & ~EXPANDS);
                    memcpy(out, expansion + 1, expansion[0] * 4);
                    out += expansion[0];
                } else {
                    *out++ = entry;
                }
            }
        }
        Py_END_ALLOW_THREADS
    }
    Py_buffer *all[] = {&codes_b, &offsets_b, &fold_b, &expansions_b, &out_offsets_b,
                        &unfoldable_b, NULL};
    release(all);
    return result;
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

/* How many shingles a text of `length` tokens has: windows of `size` tokens, or the whole text
 * as one when it is shorter. */
static inline int64_t shingle_count(int64_t length, int64_t size) {
    return length == 0 ? 0 : length < size ? 1 : length - size + 1;
}

/* The hash of each of a text's `count` shingles, for tokens of either width: characters are
 * 32-bit code points, words 64-bit hashes. A shingle is hashed by multiply-add combining and
 * fmix64; multiply-add combining is a polynomial in the tokens, so each window's value follows
 * from the previous one in two multiplications (a rolling hash) whatever the shingle size. */
#define DEFINE_SHINGLE_HASHES(NAME, TOKEN)                                                      \
    static void NAME(const TOKEN *restrict tokens, int64_t length, int64_t count, int64_t size, \
                     uint64_t seed, uint64_t *restrict out) {                                    \
        int64_t width = length < size ? length : size;                                          \
        uint64_t top = 1; /* M ** width: the weight of the token leaving the window */          \
        for (int64_t i = 0; i < width; i++) top *= MULTIPLIER;                                  \
        /* Rolling one token on: h*M - (leaving + 1)*top + (entering + 1) + seed*top*(1 - M) */ \
        uint64_t drift = seed * top * (1 - MULTIPLIER), h = seed;                               \
        for (int64_t j = 0; j < width; j++) h = h * MULTIPLIER + (uint64_t)tokens[j] + 1;       \
        for (int64_t w = 0; w < count; w++) {                                                   \
            if (w) {                                                                            \
                h = h * MULTIPLIER - ((uint64_t)tokens[w - 1] + 1) * top;                       \
                h += (uint64_t)tokens[w + width - 1] + 1 + drift;                               \
            }                                                                                   \
            out[w] = fmix64(h);                                                                 \
        }                                                                                       \
    }

DEFINE_SHINGLE_HASHES(hash_characters, uint32_t)
DEFINE_SHINGLE_HASHES(hash_words, uint64_t)

/* Text t's shingle hashes (`count` of them) into out; tokens are token_bytes wide. */
static void shingle_hashes(const Py_buffer *tokens, Py_ssize_t token_bytes, const int64_t *offsets,
                           Py_ssize_t t, int64_t count, int64_t size, uint64_t seed,
                           uint64_t *out) {
    int64_t length = offsets[t + 1] - offsets[t];
    if (token_bytes == 4)
        hash_characters((const uint32_t *)tokens->buf + offsets[t], length, count, size, seed, out);
    else
        hash_words((const uint64_t *)tokens->buf + offsets[t], length, count, size, seed, out);
}

/* One text's signature and band hashes from its shingle hashes: the hash's high 32 bits pick
 * one of k bins and its low 32 bits are the value; each bin keeps its minimum (`minima`, k
 * values of scratch). A band hashes its rows' values. */
static void sign(const uint64_t *hashes, int64_t count, uint64_t seed, uint64_t k,
                 Py_ssize_t bands, uint64_t *restrict minima, uint32_t *restrict signature,
                 uint64_t *restrict band_hashes) {
    for (uint64_t b = 0; b < k; b++) minima[b] = EMPTY_BIN;
    for (int64_t w = 0; w < count; w++) {
        uint64_t value = hashes[w] & MASK32, b = bin_of(hashes[w], k);
        /* No branch: whether a shingle lowers its bin's minimum is a coin toss for the first
         * few hundred shingles, and mispredicting it took half of the sketch's time. */
        minima[b] = value < minima[b] ? value : minima[b];
    }
    if (count) densify(minima, signature, k, seed);
    Py_ssize_t rows = (Py_ssize_t)k / bands;
    for (Py_ssize_t band = 0; band < bands; band++) {
        uint64_t bh = (uint64_t)band + (seed << 32);
        for (Py_ssize_t r = band * rows; r < band * rows + rows; r++)
            bh = bh * MULTIPLIER + signature[r] + 1;
        band_hashes[band] = fmix64(bh);
    }
}

/* sketch(tokens u32 or u64, token_bytes, offsets i64, size, seed, num_hashes, bands,
 * hash_offsets i64, hashes u64, signatures u32 [texts x num_hashes, zeroed],
 * band_hashes u64 [texts x bands]): every text's shingle hashes, signature and band hashes.
 * hash_offsets gives each text's number of shingles (the caller computes them from the
 * lengths, as shingle_count does). An empty hashes keeps none: each text's are hashed into
 * one buffer the size of the longest, which stays in the CPU caches. */
static PyObject *sketch(PyObject *self, PyObject *args) {
    Py_buffer tokens_b, offsets_b, hash_offsets_b, hashes_b, signatures_b, bands_b;
    Py_ssize_t token_bytes, size, num_hashes, bands;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "y*ny*nKnny*w*w*w*", &tokens_b, &token_bytes, &offsets_b, &size,
                          &seed, &num_hashes, &bands, &hash_offsets_b, &hashes_b, &signatures_b,
                          &bands_b))
        return NULL;
    Py_buffer *all[] = {&tokens_b, &offsets_b, &hash_offsets_b, &hashes_b,
                        &signatures_b, &bands_b, NULL};
    uint64_t *minima = PyMem_Malloc(num_hashes * sizeof(uint64_t));
    if (!minima) {
        release(all);
        return PyErr_NoMemory();
    }
    const int64_t *offsets = offsets_b.buf, *hash_offsets = hash_offsets_b.buf;
    Py_ssize_t texts = offsets_b.len / 8 - 1;
    uint64_t *scratch = NULL;
    if (hashes_b.len == 0) {
        int64_t longest = longest_item(hash_offsets, texts);
        if (!(scratch = PyMem_Malloc((longest ? longest : 1) * sizeof(uint64_t)))) {
            PyMem_Free(minima);
            release(all);
            return PyErr_NoMemory();
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < texts; t++) {
        int64_t count = hash_offsets[t + 1] - hash_offsets[t];
        uint64_t *out = scratch ? scratch : (uint64_t *)hashes_b.buf + hash_offsets[t];
        shingle_hashes(&tokens_b, token_bytes, offsets, t, count, size, seed, out);
        sign(out, count, seed, num_hashes, bands, minima,
             (uint32_t *)signatures_b.buf + t * num_hashes, (uint64_t *)bands_b.buf + t * bands);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(scratch);
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

/* Sort n well-mixed hashes through `spare` (n values) and `counts` (n + 1 counters rounded up
 * to a power of two): scatter them into as many buckets by their top bits, then an insertion
 * sort, which only has to order each bucket's one or two values. Linear, and branch-free but
 * for that last step, where a comparison sort mispredicts about every other comparison of hashes. */
static void bucket_sort_u64(uint64_t *a, uint64_t *spare, Py_ssize_t *counts, Py_ssize_t n) {
    int bits = 1;
    while (((Py_ssize_t)1 << bits) < n) bits++;
    Py_ssize_t buckets = (Py_ssize_t)1 << bits;
    memset(counts, 0, (buckets + 1) * sizeof(Py_ssize_t));
    for (Py_ssize_t i = 0; i < n; i++) counts[(a[i] >> (64 - bits)) + 1]++;
    for (Py_ssize_t k = 0; k < buckets; k++) counts[k + 1] += counts[k];
    for (Py_ssize_t i = 0; i < n; i++) spare[counts[a[i] >> (64 - bits)]++] = a[i];
    memcpy(a, spare, n * sizeof(uint64_t));
    insertion_sort(a, n);
}

/* A sum of the shared values' weights in four lanes: the k-th shared value (in the order of
 * the values) goes to lane k mod 4, and the lanes are added up as (0 + 1) + (2 + 3). Four
 * running sums, not one, so that each addition need not wait for the one before; every way of
 * measuring a pair sums in these lanes, so all give the same bits. */
static inline double lanes_total(const double lanes[4]) {
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

/* How many values two sorted unique arrays share, and (when weights are given) the sum of the
 * products of the shared values' weights, in lanes (see lanes_total): one merge for both
 * similarities. The steps are branch-free (a candidate pair's sets interleave unpredictably);
 * adding 0.0 for a value not shared leaves the sum's bits as they would be without it. */
static inline Py_ssize_t merge(const uint64_t *a, Py_ssize_t na, const uint64_t *b,
                               Py_ssize_t nb, const double *wa, const double *wb, double *weight) {
    Py_ssize_t i = 0, j = 0, shared = 0;
    double lanes[4] = {0.0, 0.0, 0.0, 0.0};
    while (i < na && j < nb) {
        uint64_t x = a[i], y = b[j];
        int same = x == y;
        if (wa) lanes[shared & 3] += same ? wa[i] * wb[j] : 0.0;
        shared += same;
        i += x <= y;
        j += y <= x;
    }
    if (weight) *weight = lanes_total(lanes);
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

/* The squared norm of a set's weights, summed in set order. */
static double squared_norm(const double *w, Py_ssize_t n) {
    double sum = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) sum += w[i] * w[i];
    return sum;
}

/* The cosine from the shared weight and the two squared norms; 1.0 for two empty sets. */
static double cosine(double shared, double norm_a, Py_ssize_t na, double norm_b, Py_ssize_t nb) {
    if (norm_a == 0.0 || norm_b == 0.0) return na == 0 && nb == 0 ? 1.0 : 0.0;
    double result = shared / sqrt(norm_a * norm_b);
    return result < 1.0 ? result : 1.0;
}

/* Cosine of two shingle sets whose shingles weigh their IDF, given their squared norms. */
static double weighted(const uint64_t *a, const double *wa, Py_ssize_t na, double norm_a,
                       const uint64_t *b, const double *wb, Py_ssize_t nb, double norm_b) {
    double shared;
    merge(a, na, b, nb, wa, wb, &shared);
    return cosine(shared, norm_a, na, norm_b, nb);
}

/* weighted_similarity(a u64, wa f64, b u64, wb f64) -> float. */
static PyObject *weighted_similarity(PyObject *self, PyObject *args) {
    Py_buffer a_b, wa_b, b_b, wb_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &a_b, &wa_b, &b_b, &wb_b)) return NULL;
    Py_ssize_t na = a_b.len / 8, nb = b_b.len / 8;
    double result = weighted(a_b.buf, wa_b.buf, na, squared_norm(wa_b.buf, na), b_b.buf,
                             wb_b.buf, nb, squared_norm(wb_b.buf, nb));
    Py_buffer *all[] = {&a_b, &wa_b, &b_b, &wb_b, NULL};
    release(all);
    return PyFloat_FromDouble(result);
}

/* Adds the weights of the shared values `at[0..n)` to the lanes in turn, the first to lane 0:
 * `n` is a multiple of 4 but at the end of a set, so that each value's lane is its rank among
 * the set's shared values mod 4 (see lanes_total). */
static inline void add_in_lanes(double lanes[4], const double *squares, const int32_t *at,
                                int64_t n) {
    int64_t i = 0;
    for (; i + 3 < n; i += 4) {
        lanes[0] += squares[at[i]];
        lanes[1] += squares[at[i + 1]];
        lanes[2] += squares[at[i + 2]];
        lanes[3] += squares[at[i + 3]];
    }
    for (int64_t lane = 0; lane < (n & 3); lane++) lanes[lane] += squares[at[i + lane]];
}

/* Shared values gathered before their weights are added: a multiple of 4 (see add_in_lanes). */
#define SHARED_BLOCK 256

/* The right set's values `values[from..to)` that the left set holds (marked `mark`): their
 * count, with their weights added to the lanes in order (unless `squares` is NULL). `narrow`
 * (a constant where it is called, so that each loop is compiled for its width) says whether
 * the values are 16-bit. */
static inline int64_t gather_shared(const void *values, int narrow, int64_t from, int64_t to,
                                    const int32_t *marks, int32_t mark, const double *squares,
                                    double lanes[4]) {
    int32_t at[SHARED_BLOCK];
    int64_t shared = 0, held = 0;
    for (int64_t k = from; k < to; k++) {
        int32_t value = narrow ? ((const uint16_t *)values)[k] : ((const int32_t *)values)[k];
        at[held] = value;
        held += marks[value] == mark;
        if (held == SHARED_BLOCK) {
            if (squares) add_in_lanes(lanes, squares, at, held);
            shared += held, held = 0;
        }
    }
    if (squares) add_in_lanes(lanes, squares, at, held);
    return shared + held;
}

/* The right sets of pairs this far ahead are fetched into the cache while a pair is measured:
 * a report's right sides lie all over its sets, and each set's first lines were waited for
 * (2.73 million pairs of 20,000 ads: 1.00 s on one thread, 0.86-0.89 s fetching ahead). */
#define PREFETCH_PAIRS 4
/* Cache lines of a set fetched ahead, at most: the processor's own prefetcher takes over a set
 * read in order once it has seen a few of its lines. */
#define PREFETCH_LINES 8

/* The i-th of numbers 16 bits wide (narrow) or 32. */
#define NUMBER_AT(numbers, narrow, i)                                                          \
    ((narrow) ? (uint32_t)((const uint16_t *)(numbers))[i]                                     \
              : (uint32_t)((const int32_t *)(numbers))[i])

/* Marks the set `values[from..to)` (16-bit where `narrow`) with `mark`. */
static inline void mark_set(const void *values, int narrow, int64_t from, int64_t to,
                            int32_t *marks, int32_t mark) {
    for (int64_t i = from; i < to; i++) marks[NUMBER_AT(values, narrow, i)] = mark;
}

static inline void prefetch_set(const void *start, const void *end) {
    const char *line = start, *last = (const char *)start + 64 * PREFETCH_LINES;
    if ((const char *)end < last) last = end;
    for (; line < last; line += 64) __builtin_prefetch(line);
}

/* Whether a pair names a set past the `sets` there are. */
static int names_outside(const int32_t *left, const int32_t *right, Py_ssize_t pairs,
                         Py_ssize_t sets) {
    for (Py_ssize_t p = 0; p < pairs; p++)
        if ((uint32_t)left[p] >= (uint64_t)sets || (uint32_t)right[p] >= (uint64_t)sets) return 1;
    return 0;
}

/* pair_similarities(numbers u16 or i32, width, distinct, weights f64 or None, offsets i64,
 * left i32, right i32, out f64): the similarity of sets left[i] and right[i] for many pairs at
 * once: their exact Jaccard with weights None, else weighted_similarity, the same floats as one
 * pair at a time.
 *
 * A set is its shingles' numbers (shingle_numbers, set after set, each below `distinct`), and
 * ``weights`` gives each distinct shingle's weight, so a set is marked in an array indexed by
 * those numbers: a left set once for the run of pairs that share it (a report's pairs come
 * sorted by their left side), and each value of the right set is one load, with no hashing and
 * no probing. The right set's values that the left holds are gathered without a branch
 * (whether a value is shared is a coin toss the CPU would mispredict), in the set's order, which
 * is ascending order of their hashes, and their weights summed in lanes in that order, as the
 * merge of weighted_similarity sums them: the same bits. Each segment's norm is computed once.
 * The numbers are `width` bytes each: 2 where they fit 16 bits (up to 65,536 distinct
 * shingles: 20,000 ads-like documents have 27,466 character 4-grams), half the bytes that every
 * pair reads. Everything past the checks of the arguments runs without the GIL, so that two
 * threads may measure halves of the pairs at once. */
static PyObject *pair_similarities(PyObject *self, PyObject *args) {
    Py_buffer numbers_b, offsets_b, left_b, right_b, out_b, weights_b = {0};
    Py_ssize_t width, distinct;
    PyObject *weights_object;
    if (!PyArg_ParseTuple(args, "y*nnOy*y*y*w*", &numbers_b, &width, &distinct, &weights_object,
                          &offsets_b, &left_b, &right_b, &out_b))
        return NULL;
    int weighted = weights_object != Py_None;
    Py_buffer *all[] = {&numbers_b, &offsets_b, &left_b, &right_b, &out_b,
                        weighted ? &weights_b : NULL, NULL};
    if (weighted && PyObject_GetBuffer(weights_object, &weights_b, PyBUF_SIMPLE) < 0) {
        release(all);
        return NULL;
    }
    const void *numbers = numbers_b.buf;
    const int64_t *offsets = offsets_b.buf;
    const int32_t *left = left_b.buf, *right = right_b.buf;
    double *out = out_b.buf;
    Py_ssize_t segments = offsets_b.len / 8 - 1, pairs = left_b.len / 4;
    int narrow = width == 2;
    const char *refused = NULL;
    if (segments < 0 || offsets[0] != 0 || offsets[segments] > numbers_b.len / width)
        refused = "pair_similarities: offsets must start at 0 and end within the numbers";
    if (width != 2 && width != 4) refused = "pair_similarities: numbers are 2 or 4 bytes wide";
    if (narrow && distinct > 65536) refused = "pair_similarities: 16 bits number 65,536 shingles";
    if (segments >= INT32_MAX) refused = "pair_similarities: too many sets for 32-bit marks";
    if (weighted && weights_b.len / 8 != distinct)
        refused = "pair_similarities: shingle numbers must index the weights";
    if (right_b.len / 4 != pairs || out_b.len / 8 != pairs)
        refused = "pair_similarities: left, right and out must hold one value per pair";
    double *norms = refused ? NULL : PyMem_Malloc((segments + 1) * sizeof(double));
    double *squares = refused ? NULL : PyMem_Malloc((distinct + 1) * sizeof(double));
    /* The left set's mark, its number + 1: 32 bits keep the array in the CPU's cache longer. */
    int32_t *marks = refused ? NULL : PyMem_Calloc(distinct + 1, sizeof(int32_t));
    if (refused || !norms || !squares || !marks) {
        PyMem_Free(norms), PyMem_Free(squares), PyMem_Free(marks);
        return refuse(all, refused);
    }
    Py_BEGIN_ALLOW_THREADS
    if (names_outside(left, right, pairs, segments))
        refused = "pair_similarities: pairs must name sets below len(offsets) - 1";
    for (Py_ssize_t d = 0; d < distinct; d++) /* weight * weight */
        squares[d] = weighted ? ((double *)weights_b.buf)[d] * ((double *)weights_b.buf)[d] : 1.0;
    for (Py_ssize_t s = 0; s < segments && !refused; s++) {
        double sum = 0.0;
        for (int64_t i = offsets[s]; i < offsets[s + 1]; i++) {
            uint32_t number = NUMBER_AT(numbers, narrow, i);
            if (number >= (uint64_t)distinct) { /* each checked where first read */
                refused = "pair_similarities: shingle numbers must be below distinct";
                break;
            }
            sum += squares[number];
        }
        norms[s] = sum;
    }
    int64_t marked = -1; /* the left segment marked */
    const double *summed = weighted ? squares : NULL;
    for (Py_ssize_t p = 0; p < pairs && !refused; p++) {
        int64_t l = left[p], r = right[p], nl = offsets[l + 1] - offsets[l];
        int64_t nr = offsets[r + 1] - offsets[r];
        int32_t mark = (int32_t)(l + 1);
        if (p + PREFETCH_PAIRS < pairs) {
            Py_ssize_t ahead = right[p + PREFETCH_PAIRS];
            prefetch_set((const char *)numbers + offsets[ahead] * width,
                         (const char *)numbers + offsets[ahead + 1] * width);
        }
        if (l != marked) {
            marked = l;
            mark_set(numbers, narrow, offsets[l], offsets[l + 1], marks, mark);
        }
        double lanes[4] = {0.0, 0.0, 0.0, 0.0};
        int64_t shared_count =
            narrow ? gather_shared(numbers, 1, offsets[r], offsets[r + 1], marks, mark, summed,
                                   lanes)
                   : gather_shared(numbers, 0, offsets[r], offsets[r + 1], marks, mark, summed,
                                   lanes);
        if (weighted)
            out[p] = cosine(lanes_total(lanes), norms[l], nl, norms[r], nr);
        else
            out[p] = nl + nr ? (double)shared_count / (double)(nl + nr - shared_count) : 1.0;
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(norms), PyMem_Free(squares), PyMem_Free(marks);
    if (refused) return refuse(all, refused);
    release(all);
    Py_RETURN_NONE;
}

/* --- numerals ------------------------------------------------------------------------------ */

/* int64 values appended to a buffer that grows as they come. */
typedef struct {
    int64_t *items;
    Py_ssize_t size, room;
} Int64s;

static int int64s_add(Int64s *a, int64_t value) {
    if (a->size == a->room) {
        Py_ssize_t room = a->room ? 2 * a->room : 1024;
        int64_t *items = PyMem_Realloc(a->items, room * sizeof(int64_t));
        if (!items) return -1;
        a->items = items, a->room = room;
    }
    a->items[a->size++] = value;
    return 0;
}

/* The value of a decimal digit (any script's: what `\d` matches), or -1. */
static inline int decimal_of(Py_UCS4 ch) {
    if (ch - '0' < 10) return (int)(ch - '0');
    return ch < 0x80 ? -1 : Py_UNICODE_TODECIMAL(ch);
}

/* numeral_runs(texts (a list of str), value_digits) -> (owners, values, long) as bytes of int64.
 * The runs of decimal digits of each text (the characters `\d` matches: every script's, which
 * NFKC leaves as they are), a run ending with its text: for each, the number of the text it is
 * in and its value past its leading zeros (`01060` is 1060). A run of more significant digits
 * than `value_digits`, whose value an int64 may not hold, has value 0 and is listed in `long` as
 * (its number among the runs, where its significant digits start in its text, where it ends).
 * Read from the strings themselves, with no array of code points made. */
static PyObject *numeral_runs(PyObject *self, PyObject *args) {
    PyObject *texts;
    int value_digits;
    if (!PyArg_ParseTuple(args, "O!i", &PyList_Type, &texts, &value_digits)) return NULL;
    Int64s owners = {NULL, 0, 0}, values = {NULL, 0, 0}, longs = {NULL, 0, 0};
    int failed = 0;
    for (Py_ssize_t t = 0; t < PyList_GET_SIZE(texts) && !failed; t++) {
        PyObject *text = PyList_GET_ITEM(texts, t);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "numeral_runs: texts must be str");
            failed = 1;
            break;
        }
#if PY_VERSION_HEX < 0x030C0000 /* before 3.12 a string made by the old API may not be ready */
        if (PyUnicode_READY(text) < 0) {
            failed = 1;
            break;
        }
#endif
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        for (Py_ssize_t i = 0; i < length && !failed;) {
            int digit = decimal_of(PyUnicode_READ(kind, data, i));
            if (digit < 0) {
                i++;
                continue;
            }
            Py_ssize_t significant = -1;  /* where the digits past the leading zeros start */
            int64_t value = 0;
            Py_ssize_t end = i;
            for (; end < length && (digit = decimal_of(PyUnicode_READ(kind, data, end))) >= 0;
                 end++) {
                if (significant < 0 && digit) significant = end;
                if (significant >= 0 && end - significant < value_digits)
                    value = value * 10 + digit;
            }
            if (significant < 0) significant = end - 1;  /* a run of zeros is 0 */
            int wide = end - significant > value_digits;
            failed = int64s_add(&owners, t) < 0 || int64s_add(&values, wide ? 0 : value) < 0 ||
                     (wide && (int64s_add(&longs, owners.size - 1) < 0 ||
                               int64s_add(&longs, significant) < 0 ||
                               int64s_add(&longs, end) < 0));
            if (failed) PyErr_NoMemory();
            i = end;
        }
    }
    PyObject *result = failed ? NULL
                              : Py_BuildValue("(NNN)", as_bytes(owners.items, owners.size),
                                              as_bytes(values.items, values.size),
                                              as_bytes(longs.items, longs.size));
    PyMem_Free(owners.items), PyMem_Free(values.items), PyMem_Free(longs.items);
    return result;
}

/* numeral_agreement(members i32, offsets i64, distinct, left i32, right i32, weight f64,
 * out f64): multiplies out[i] by the agreement of the numeral sets left[i] and right[i] (sets of
 * numbers below `distinct`, set after set at `offsets`): 1 - weight * (1 - shared / fewer), where
 * fewer is the smaller set's size, and 1 where either set is empty. A left set is marked once for
 * the run of pairs that share it, as pair_similarities marks it; the same floats as numpy's
 * 1 - weight * (1 - shared / fewer) times out. Runs without the GIL. */
static PyObject *numeral_agreement(PyObject *self, PyObject *args) {
    Py_buffer members_b, offsets_b, left_b, right_b, out_b;
    Py_ssize_t distinct;
    double weight;
    if (!PyArg_ParseTuple(args, "y*y*ny*y*dw*", &members_b, &offsets_b, &distinct, &left_b,
                          &right_b, &weight, &out_b))
        return NULL;
    Py_buffer *all[] = {&members_b, &offsets_b, &left_b, &right_b, &out_b, NULL};
    const int32_t *members = members_b.buf, *left = left_b.buf, *right = right_b.buf;
    const int64_t *offsets = offsets_b.buf;
    double *out = out_b.buf;
    Py_ssize_t sets = offsets_b.len / 8 - 1, pairs = left_b.len / 4;
    const char *refused = NULL;
    if (sets < 0 || offsets[0] != 0 || offsets[sets] > members_b.len / 4)
        refused = "numeral_agreement: offsets must start at 0 and end within the members";
    if (sets >= INT32_MAX) refused = "numeral_agreement: too many sets for 32-bit marks";
    if (distinct < 0) refused = "numeral_agreement: distinct must not be negative";
    if (right_b.len / 4 != pairs || out_b.len / 8 != pairs)
        refused = "numeral_agreement: left, right and out must hold one value per pair";
    int32_t *marks = refused ? NULL : PyMem_Calloc(distinct + 1, sizeof(int32_t));
    if (refused || !marks) return refuse(all, refused);
    Py_BEGIN_ALLOW_THREADS
    if (names_outside(left, right, pairs, sets))
        refused = "numeral_agreement: pairs must name sets below len(offsets) - 1";
    for (int64_t i = 0; i < offsets[sets] && !refused; i++)
        if ((uint32_t)members[i] >= (uint64_t)distinct)
            refused = "numeral_agreement: members must be below distinct";
    int64_t marked = -1;
    for (Py_ssize_t p = 0; p < pairs && !refused; p++) {
        int64_t l = left[p], r = right[p];
        int32_t mark = (int32_t)(l + 1);
        if (l != marked) {
            marked = l;
            mark_set(members, 0, offsets[l], offsets[l + 1], marks, mark);
        }
        int64_t shared = gather_shared(members, 0, offsets[r], offsets[r + 1], marks, mark, NULL,
                                       NULL);
        int64_t nl = offsets[l + 1] - offsets[l], nr = offsets[r + 1] - offsets[r];
        int64_t fewer = nl < nr ? nl : nr;
        if (fewer > 0) out[p] *= 1.0 - weight * (1.0 - (double)shared / (double)fewer);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(marks);
    if (refused) return refuse(all, refused);
    release(all);
    Py_RETURN_NONE;
}

/* --- counting distinct values ---------------------------------------------------------- */

/* The distinct values seen so far, in order of first sight, and an open-addressing table from a
 * value to its position among them; it doubles when half full. The values are well-mixed
 * hashes, so their low bits index the table. Its memory is Python's raw allocator's, which
 * needs no GIL: a kernel may grow it with the GIL released. */
typedef struct {
    uint64_t *values;
    int64_t *counts, *last_seen; /* per distinct value: document frequency, last segment */
    int64_t *slots;              /* position of the value in `values`, -1 for an empty slot */
    Py_ssize_t size, capacity;   /* distinct values; slots (a power of two) */
} Distinct;

static int distinct_init(Distinct *d, int with_counts) {
    d->size = 0, d->capacity = 1 << 16;
    d->values = PyMem_RawMalloc(d->capacity / 2 * sizeof(uint64_t));
    d->counts = with_counts ? PyMem_RawMalloc(d->capacity / 2 * sizeof(int64_t)) : NULL;
    d->last_seen = with_counts ? PyMem_RawMalloc(d->capacity / 2 * sizeof(int64_t)) : NULL;
    d->slots = PyMem_RawMalloc(d->capacity * sizeof(int64_t));
    if (!d->values || !d->slots || (with_counts && (!d->counts || !d->last_seen))) return -1;
    memset(d->slots, 0xFF, d->capacity * sizeof(int64_t));
    return 0;
}

static void distinct_free(Distinct *d) {
    PyMem_RawFree(d->values), PyMem_RawFree(d->counts);
    PyMem_RawFree(d->last_seen), PyMem_RawFree(d->slots);
}

static Py_ssize_t slot_of(const Distinct *d, uint64_t value) {
    uint64_t mask = d->capacity - 1, slot = value & mask;
    while (d->slots[slot] >= 0 && d->values[d->slots[slot]] != value) slot = (slot + 1) & mask;
    return slot;
}

static int distinct_grow(Distinct *d) {
    Py_ssize_t capacity = d->capacity * 2;
    uint64_t *values = PyMem_RawRealloc(d->values, capacity / 2 * sizeof(uint64_t));
    if (!values) return -1;
    d->values = values;
    if (d->counts) {
        int64_t *counts = PyMem_RawRealloc(d->counts, capacity / 2 * sizeof(int64_t));
        if (!counts) return -1;
        d->counts = counts;
        int64_t *last = PyMem_RawRealloc(d->last_seen, capacity / 2 * sizeof(int64_t));
        if (!last) return -1;
        d->last_seen = last;
    }
    int64_t *slots = PyMem_RawMalloc(capacity * sizeof(int64_t));
    if (!slots) return -1;
    memset(slots, 0xFF, capacity * sizeof(int64_t));
    PyMem_RawFree(d->slots);
    d->slots = slots, d->capacity = capacity;
    for (Py_ssize_t i = 0; i < d->size; i++) d->slots[slot_of(d, d->values[i])] = i;
    return 0;
}

/* The position of `value` among the distinct values, adding it if new; -1 out of memory. */
static Py_ssize_t distinct_add(Distinct *d, uint64_t value) {
    Py_ssize_t slot = slot_of(d, value);
    if (d->slots[slot] >= 0) return d->slots[slot];
    if (2 * (d->size + 1) > d->capacity) {
        if (distinct_grow(d) < 0) return -1;
        slot = slot_of(d, value);
    }
    d->values[d->size] = value;
    if (d->counts) d->counts[d->size] = 0, d->last_seen[d->size] = -1;
    d->slots[slot] = d->size;
    return d->size++;
}

/* shingle_numbers(tokens u32 or u64, token_bytes, offsets i64, size, seed, in_order, numbers i32,
 * out_offsets i64) -> bytes. Each text's distinct shingles (hashed as sketch hashes them), set
 * after set, each as its number among all the texts' distinct shingles, numbered in order of
 * first sight; returns those distinct hashes (u64). With in_order, each set is in ascending
 * order of its hashes (the order a weighted similarity sums in); else in order of first sight
 * in its text, which spares sorting it (a count of shared shingles needs no order). numbers
 * has room for every shingle; out_offsets[0] is zero.
 *
 * Each text is hashed into a scratch buffer and sorted there while it is in the CPU's cache:
 * hashing the whole batch first, then sorting it and numbering it, wrote and read 77 MB of
 * hashes for 20,000 ads, and paging that memory in took as long as the computing. */
static PyObject *shingle_numbers(PyObject *self, PyObject *args) {
    Py_buffer tokens_b, offsets_b, numbers_b, out_offsets_b;
    Py_ssize_t token_bytes, size;
    unsigned long long seed;
    int in_order;
    if (!PyArg_ParseTuple(args, "y*ny*nKpw*w*", &tokens_b, &token_bytes, &offsets_b, &size, &seed,
                          &in_order, &numbers_b, &out_offsets_b))
        return NULL;
    Py_buffer *all[] = {&tokens_b, &offsets_b, &numbers_b, &out_offsets_b, NULL};
    const int64_t *offsets = offsets_b.buf;
    int32_t *numbers = numbers_b.buf;
    int64_t *out_offsets = out_offsets_b.buf;
    Py_ssize_t texts = offsets_b.len / 8 - 1, written = 0, longest = 1;
    for (Py_ssize_t t = 0; t < texts; t++) {
        int64_t count = shingle_count(offsets[t + 1] - offsets[t], size);
        if (count > longest) longest = count;
    }
    Py_ssize_t buckets = 2;
    while (buckets < longest) buckets *= 2;
    uint64_t *hashes = PyMem_Malloc(longest * sizeof(uint64_t));
    uint64_t *spare = PyMem_Malloc(longest * sizeof(uint64_t));
    Py_ssize_t *counts = PyMem_Malloc((buckets + 1) * sizeof(Py_ssize_t));
    Distinct d = {0};
    /* Without the order, a repeat within a text is told by the text its number was last seen in. */
    int failed = !hashes || !spare || !counts || distinct_init(&d, !in_order) < 0;
    Py_BEGIN_ALLOW_THREADS /* buffers only: two threads may number halves of the texts */
    for (Py_ssize_t t = 0; t < texts && !failed; t++) {
        int64_t n = shingle_count(offsets[t + 1] - offsets[t], size);
        shingle_hashes(&tokens_b, token_bytes, offsets, t, n, size, seed, hashes);
        if (in_order && n < 32) /* below that, counting into buckets costs more than comparing */
            insertion_sort(hashes, n);
        else if (in_order)
            bucket_sort_u64(hashes, spare, counts, n);
        for (int64_t i = 0; i < n && !failed; i++) {
            if (in_order && i && hashes[i] == hashes[i - 1]) continue;
            Py_ssize_t number = distinct_add(&d, hashes[i]);
            failed = number < 0 || number >= INT32_MAX;
            if (!in_order && !failed) {
                if (d.last_seen[number] == t) continue;
                d.last_seen[number] = t;
            }
            numbers[written++] = (int32_t)number;
        }
        out_offsets[t + 1] = written;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = failed ? NULL : as_bytes(d.values, d.size);
    if (!result) PyErr_NoMemory();
    PyMem_Free(hashes), PyMem_Free(spare), PyMem_Free(counts);
    distinct_free(&d);
    release(all);
    return result;
}

/* document_frequencies(sets: a sequence of u64 arrays) -> (values, counts): every distinct value
 * of the arrays (u64 bytes, in order of first sight) and how many arrays hold it (i64 bytes); a
 * value repeated within one array counts once. The arrays are read where they are (each
 * record's shingle hashes): joining them first copied 38 MB for 10,000 ads. */
static PyObject *document_frequencies(PyObject *self, PyObject *args) {
    PyObject *sets_object, *sets;
    if (!PyArg_ParseTuple(args, "O", &sets_object)) return NULL;
    if (!(sets = PySequence_Fast(sets_object, "document_frequencies: a sequence of arrays")))
        return NULL;
    Distinct d;
    PyObject *result = NULL;
    int failed = distinct_init(&d, 1) < 0;
    for (Py_ssize_t s = 0; s < PySequence_Fast_GET_SIZE(sets) && !failed; s++) {
        Py_buffer set_b;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(sets, s), &set_b, PyBUF_SIMPLE) < 0) {
            failed = 1;
            break;
        }
        const uint64_t *hashes = set_b.buf;
        for (Py_ssize_t i = 0; i < set_b.len / 8; i++) {
            Py_ssize_t at = distinct_add(&d, hashes[i]);
            if (at < 0) {
                failed = 1;
                break;
            }
            if (d.last_seen[at] != s) d.counts[at]++, d.last_seen[at] = s;
        }
        PyBuffer_Release(&set_b);
    }
    if (!failed) {
        PyObject *values = as_bytes(d.values, d.size), *counts = as_bytes(d.counts, d.size);
        if (values && counts) result = PyTuple_Pack(2, values, counts);
        Py_XDECREF(values), Py_XDECREF(counts);
    }
    if (!result && !PyErr_Occurred()) PyErr_NoMemory();
    distinct_free(&d);
    Py_DECREF(sets);
    return result;
}

/* --- the band self-join ------------------------------------------------------------------ */

/* shared_buckets(keys i64, groups i32, members i32, sizes i64) -> (held, buckets). Given keys
 * and the group holding each, groups in ascending order: the buckets of equal keys that two or
 * more distinct groups share, each bucket's groups once each and in ascending order, written
 * bucket after bucket to members, and each bucket's size to sizes (both with room for every
 * key), buckets in order of their key's first sight. Two passes over a hash table of the keys,
 * where sorting (key, group) pairs took 20 s for a million records' 64 band keys each. */
static PyObject *shared_buckets(PyObject *self, PyObject *args) {
    Py_buffer keys_b, groups_b, members_b, sizes_b;
    if (!PyArg_ParseTuple(args, "y*y*w*w*", &keys_b, &groups_b, &members_b, &sizes_b))
        return NULL;
    Py_buffer *all[] = {&keys_b, &groups_b, &members_b, &sizes_b, NULL};
    const uint64_t *keys = keys_b.buf;
    const int32_t *groups = groups_b.buf;
    int32_t *members = members_b.buf;
    int64_t *sizes = sizes_b.buf;
    Py_ssize_t n = keys_b.len / 8, held = 0, buckets = 0;
    if (groups_b.len / 4 != n || members_b.len / 4 < n || sizes_b.len / 8 < n) {
        release(all);
        PyErr_SetString(PyExc_ValueError, "shared_buckets: a group and room for every key");
        return NULL;
    }
    Distinct d;
    int64_t *bucket_of = PyMem_Malloc((n + 1) * sizeof(int64_t));
    int failed = distinct_init(&d, 1) < 0 || !bucket_of;
    /* Pass 1: each key's distinct groups, counted (a group repeats only right after itself). */
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        Py_ssize_t at = distinct_add(&d, keys[i]);
        if (at < 0) {
            failed = 1;
            break;
        }
        bucket_of[i] = at;
        if (d.last_seen[at] != groups[i]) d.counts[at]++, d.last_seen[at] = groups[i];
    }
    if (!failed) {
        /* last_seen becomes each shared bucket's next place in members (-1: not shared), and
         * counts the group last placed there. */
        for (Py_ssize_t b = 0; b < d.size; b++) {
            d.last_seen[b] = d.counts[b] > 1 ? held : -1;
            if (d.counts[b] > 1) sizes[buckets++] = d.counts[b], held += d.counts[b];
            d.counts[b] = -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t b = bucket_of[i];
            if (d.last_seen[b] < 0 || d.counts[b] == groups[i]) continue;
            members[d.last_seen[b]++] = groups[i];
            d.counts[b] = groups[i];
        }
    }
    distinct_free(&d);
    PyMem_Free(bucket_of);
    release(all);
    if (failed) return PyErr_NoMemory();
    return Py_BuildValue("nn", held, buckets);
}

/* key_holders(keys i64, sizes i64, wanted i64, places i64, out i64 or None). Which key sets
 * (`sizes` keys each, set after set, as a store's contents hold them) hold each of the distinct
 * `wanted` keys. With out None, how many, added to places. Else the sets' numbers, in
 * ascending order, written to out from places[w] on, places[w] advancing; a wanted key whose
 * place is -1 is passed over. A bitmap of the wanted keys' top bits, small enough for the
 * CPU's cache, turns most keys away before the table: a store holds tens of millions of keys,
 * a batch a few hundred thousand, where sorting the store's keys took 7 s a batch at a million
 * records. */
static PyObject *key_holders(PyObject *self, PyObject *args) {
    Py_buffer keys_b, sizes_b, wanted_b, places_b, out_b = {0};
    PyObject *out_object;
    if (!PyArg_ParseTuple(args, "y*y*y*w*O", &keys_b, &sizes_b, &wanted_b, &places_b, &out_object))
        return NULL;
    Py_buffer *all[] = {&keys_b, &sizes_b, &wanted_b, &places_b, NULL};
    if (out_object != Py_None && PyObject_GetBuffer(out_object, &out_b, PyBUF_WRITABLE) < 0) {
        release(all);
        return NULL;
    }
    const uint64_t *keys = keys_b.buf, *wanted = wanted_b.buf;
    const int64_t *sizes = sizes_b.buf;
    int64_t *places = places_b.buf, *out = out_b.buf;
    Py_ssize_t n = keys_b.len / 8, m = wanted_b.len / 8, room = out_b.len / 8;
    Py_ssize_t sets = sizes_b.len / 8, set = 0, set_end = sets ? sizes[0] : 0;
    int shift = 64 - 16; /* a bitmap of 2**16 bits or more: 8 for each wanted key, up to 8 MB */
    while (shift > 64 - 26 && ((Py_ssize_t)1 << (64 - shift)) < 8 * m) shift--;
    uint8_t *bitmap = PyMem_Calloc((size_t)1 << (64 - shift - 3), 1);
    Distinct d = {0};
    int failed = !bitmap || distinct_init(&d, 0) < 0, repeated = 0, overflow = 0;
    for (Py_ssize_t w = 0; w < m && !failed; w++) {
        Py_ssize_t at = distinct_add(&d, wanted[w]);
        failed = at < 0, repeated = at >= 0 && at != w;
        if (repeated) break;
        uint64_t bit = wanted[w] >> shift;
        bitmap[bit >> 3] |= (uint8_t)(1 << (bit & 7));
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t k = 0; k < sets; k++) total += sizes[k];
    if (places_b.len / 8 != m || total != n) repeated = 1;
    if (!failed && !repeated) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            while (i >= set_end) set_end += sizes[++set]; /* the set holding key i */
            uint64_t bit = keys[i] >> shift;
            if (!(bitmap[bit >> 3] >> (bit & 7) & 1)) continue;
            int64_t w = d.slots[slot_of(&d, keys[i])];
            if (w < 0) continue;
            if (!out) {
                places[w]++;
            } else if (places[w] >= 0) {
                if (places[w] >= room) {
                    overflow = 1;
                    break;
                }
                out[places[w]++] = set;
            }
        }
        Py_END_ALLOW_THREADS
    }
    distinct_free(&d);
    PyMem_Free(bitmap);
    release(all);
    if (out_object != Py_None) PyBuffer_Release(&out_b);
    if (failed) return PyErr_NoMemory();
    if (repeated || overflow) {
        PyErr_SetString(
            PyExc_ValueError, "key_holders: sizes that sum to the keys, distinct wanted keys, "
                              "a place each, room");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The first place at or after `from` in the sorted `a` whose value is not below `w` (with
 * `past`, not at or below): a gallop from `from`, then a binary search of the last stride. */
static Py_ssize_t gallop(const int64_t *a, Py_ssize_t n, Py_ssize_t from, int64_t w, int past) {
    Py_ssize_t low = from, high = from, stride = 1;
    while (high < n && (past ? a[high] <= w : a[high] < w)) {
        low = high + 1;
        high += stride;
        stride <<= 1;
    }
    if (high > n) high = n;
    while (low < high) {
        Py_ssize_t middle = low + (high - low) / 2;
        if (past ? a[middle] <= w : a[middle] < w)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

/* sorted_search(a i64, v i64, right, out i64). np.searchsorted(a, v, "right" if right else
 * "left") into out, for a `v` in ascending order as well: each search gallops on from the last
 * answer, where a binary search over the whole of `a` costs a cache miss a step (a batch's
 * 640,000 distinct keys searched in a run of 16 million sorted keys: 150 ms with numpy). */
static PyObject *sorted_search(PyObject *self, PyObject *args) {
    Py_buffer a_b, v_b, out_b;
    int right;
    if (!PyArg_ParseTuple(args, "y*y*pw*", &a_b, &v_b, &right, &out_b)) return NULL;
    Py_buffer *all[] = {&a_b, &v_b, &out_b, NULL};
    const int64_t *a = a_b.buf, *v = v_b.buf;
    int64_t *out = out_b.buf;
    Py_ssize_t n = a_b.len / 8, m = v_b.len / 8;
    int fits = out_b.len / 8 == m, ascending = 1;
    if (fits) {
        Py_BEGIN_ALLOW_THREADS
        Py_ssize_t at = 0;
        for (Py_ssize_t i = 0; i < m; i++) {
            if (i && v[i] < v[i - 1]) {
                ascending = 0;
                break;
            }
            at = gallop(a, n, at, v[i], right);
            out[i] = at;
        }
        Py_END_ALLOW_THREADS
    }
    release(all);
    if (!fits || !ascending) {
        PyErr_SetString(PyExc_ValueError, "sorted_search: values in ascending order, a place each");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* bucket_pairs(members i32, sizes i64, largest, out i64 or None) -> pairs. Given buckets as
 * their members, bucket after bucket, each bucket's in ascending order, and each bucket's size:
 * every pair of members in each bucket of at most `largest`, once per bucket, coded as
 * low * 2**32 + high; larger buckets are left out. With out None, only counts them (so the
 * caller can check its budget and allocate). */
static PyObject *bucket_pairs(PyObject *self, PyObject *args) {
    Py_buffer members_b, sizes_b, out_b = {0};
    Py_ssize_t largest;
    PyObject *out_object;
    if (!PyArg_ParseTuple(args, "y*y*nO", &members_b, &sizes_b, &largest, &out_object))
        return NULL;
    if (out_object != Py_None && PyObject_GetBuffer(out_object, &out_b, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&members_b), PyBuffer_Release(&sizes_b);
        return NULL;
    }
    const int32_t *members = members_b.buf;
    const int64_t *sizes = sizes_b.buf;
    int64_t *out = out_b.buf;
    Py_ssize_t buckets = sizes_b.len / 8, held = members_b.len / 4, start = 0;
    long long written = 0, room = out_b.len / 8;
    for (Py_ssize_t bucket = 0; bucket < buckets && start + sizes[bucket] <= held; bucket++) {
        Py_ssize_t end = start + sizes[bucket];
        long long pairs = (long long)sizes[bucket] * (sizes[bucket] - 1) / 2;
        if (out && sizes[bucket] <= largest && written + pairs > room) {
            Py_buffer *all[] = {&members_b, &sizes_b, &out_b, NULL};
            release(all);
            PyErr_SetString(PyExc_ValueError, "bucket_pairs: out holds fewer than the pairs");
            return NULL;
        }
        if (sizes[bucket] <= largest && out)
            for (Py_ssize_t a = start; a < end; a++)
                for (Py_ssize_t b = a + 1; b < end; b++)
                    out[written++] = ((int64_t)members[a] << 32) | (int64_t)members[b];
        else if (sizes[bucket] <= largest)
            written += pairs;
        start = end;
    }
    Py_buffer *all[] = {&members_b, &sizes_b, out ? &out_b : NULL, NULL};
    release(all);
    return PyLong_FromLongLong(written);
}

/* prefix_pairs(members i32, starts i64, entry_bucket i64, entry_at i64, entry_offsets i64, first,
 * last, marks i32, out i64) -> written. The exact report's candidates: buckets of sets that hold
 * a shingle in their prefix (bucket b is members[starts[b]:starts[b + 1]], in ascending order);
 * set x's entries (entry_offsets[x] to entry_offsets[x + 1]) name a bucket it is in and where
 * in it. For each set x from first to last - 1, every set before it in any of its buckets,
 * once, coded as y * 2**32 + x: a pair that shares many prefix shingles is written once, not
 * once a bucket. marks (one per set, zero at first) tells the sets already written for x; out
 * must hold the sum of the entries' positions of these sets (the most there can be). */
static PyObject *prefix_pairs(PyObject *self, PyObject *args) {
    Py_buffer members_b, starts_b, bucket_b, at_b, offsets_b, marks_b, out_b;
    Py_ssize_t first, last;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*nnw*w*", &members_b, &starts_b, &bucket_b, &at_b,
                          &offsets_b, &first, &last, &marks_b, &out_b))
        return NULL;
    Py_buffer *all[] = {&members_b, &starts_b, &bucket_b, &at_b,
                        &offsets_b, &marks_b, &out_b,   NULL};
    const int32_t *members = members_b.buf;
    const int64_t *starts = starts_b.buf, *bucket = bucket_b.buf, *at = at_b.buf;
    const int64_t *offsets = offsets_b.buf;
    int32_t *marks = marks_b.buf;
    int64_t *out = out_b.buf;
    Py_ssize_t sets = offsets_b.len / 8 - 1, room = out_b.len / 8, written = 0;
    int refused = first < 0 || last > sets || first > last || marks_b.len / 4 < sets;
    for (Py_ssize_t x = first; x < last && !refused; x++) {
        for (int64_t e = offsets[x]; e < offsets[x + 1] && !refused; e++) {
            const int32_t *held = members + starts[bucket[e]];
            for (int64_t k = 0; k < at[e]; k++) {
                int32_t y = held[k];
                if (marks[y] == (int32_t)(x + 1)) continue;
                if (written == room) {
                    refused = 1;
                    break;
                }
                marks[y] = (int32_t)(x + 1);
                out[written++] = ((int64_t)y << 32) | (int64_t)x;
            }
        }
    }
    release(all);
    if (refused) {
        PyErr_SetString(PyExc_ValueError, "prefix_pairs: sets out of range, or out too small");
        return NULL;
    }
    return PyLong_FromSsize_t(written);
}

/* sort_pair_codes(codes i64): sorts pair codes (low * 2**32 + high, 0 <= low, high < 2**31)
 * in place, by radix: numpy's comparison sort took 190 ms of a 20,000-document report's
 * 3.3 million codes. Each code is first packed to low * 2**h + high, h the bits of the largest
 * high (the same order in fewer bits); the packed keys are split in place by their top 8 bits
 * (American flag sort, no second buffer: a million-record report sorts 320 MB of codes), again
 * while a part is larger than SPARE_KEYS, and each part is then sorted by its low digits through
 * a spare buffer of at most SPARE_KEYS. */
#define SPLIT_BITS 8
#define DIGIT_BITS 11
#define SPARE_KEYS ((Py_ssize_t)1 << 20)

static void sort_by_low_digits(uint64_t *a, uint64_t *spare, Py_ssize_t n, int bits) {
    uint64_t *from = a, *to = spare;
    Py_ssize_t counts[1 << DIGIT_BITS];
    for (int shift = 0; shift < bits; shift += DIGIT_BITS) {
        memset(counts, 0, sizeof counts);
        for (Py_ssize_t i = 0; i < n; i++) counts[(from[i] >> shift) & ((1 << DIGIT_BITS) - 1)]++;
        for (Py_ssize_t d = 0, total = 0; d < (1 << DIGIT_BITS); d++) {
            Py_ssize_t count = counts[d];
            counts[d] = total, total += count;
        }
        for (Py_ssize_t i = 0; i < n; i++)
            to[counts[(from[i] >> shift) & ((1 << DIGIT_BITS) - 1)]++] = from[i];
        uint64_t *swap = from;
        from = to, to = swap;
    }
    if (from != a) memcpy(a, from, n * sizeof(uint64_t));
}

static void sort_keys(uint64_t *a, uint64_t *spare, Py_ssize_t n, int bits) {
    if (n < 64) {
        insertion_sort(a, n);
        return;
    }
    if (n <= SPARE_KEYS) {
        sort_by_low_digits(a, spare, n, bits);
        return;
    }
    int shift = bits > SPLIT_BITS ? bits - SPLIT_BITS : 0;
    Py_ssize_t ends[1 << SPLIT_BITS] = {0}, next[1 << SPLIT_BITS];
#define TOP(v) ((int)(((v) >> shift) & ((1 << SPLIT_BITS) - 1)))
    for (Py_ssize_t i = 0; i < n; i++) ends[TOP(a[i])]++;
    for (Py_ssize_t d = 0, total = 0; d < (1 << SPLIT_BITS); d++) {
        next[d] = total, total += ends[d], ends[d] = total;
    }
    for (int d = 0; d < (1 << SPLIT_BITS); d++) /* each value to its part, cycle by cycle */
        while (next[d] < ends[d]) {
            uint64_t value = a[next[d]];
            for (int to = TOP(value); to != d; to = TOP(value)) {
                uint64_t moved = a[next[to]];
                a[next[to]++] = value, value = moved;
            }
            a[next[d]++] = value;
        }
#undef TOP
    for (int d = 0; shift && d < (1 << SPLIT_BITS); d++) {
        Py_ssize_t from = d ? ends[d - 1] : 0;
        sort_keys(a + from, spare, ends[d] - from, shift);
    }
}

static PyObject *sort_pair_codes(PyObject *self, PyObject *args) {
    Py_buffer codes_b;
    if (!PyArg_ParseTuple(args, "w*", &codes_b)) return NULL;
    uint64_t *codes = codes_b.buf;
    Py_ssize_t n = codes_b.len / 8;
    uint64_t *spare = PyMem_Malloc((n < SPARE_KEYS ? n : SPARE_KEYS) * sizeof(uint64_t) + 8);
    if (!spare) {
        PyBuffer_Release(&codes_b);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    uint64_t lows = 0, highs = 0;
    for (Py_ssize_t i = 0; i < n; i++) lows |= codes[i] >> 32, highs |= codes[i] & 0xFFFFFFFFu;
    int low_bits = 0, high_bits = 0;
    while (lows >> low_bits) low_bits++;
    while (highs >> high_bits) high_bits++;
    for (Py_ssize_t i = 0; i < n; i++)
        codes[i] = (codes[i] >> 32) << high_bits | (codes[i] & 0xFFFFFFFFu);
    sort_keys(codes, spare, n, low_bits + high_bits);
    for (Py_ssize_t i = 0; i < n; i++)
        codes[i] = (codes[i] >> high_bits) << 32 | (codes[i] & (((uint64_t)1 << high_bits) - 1));
    Py_END_ALLOW_THREADS
    PyMem_Free(spare);
    PyBuffer_Release(&codes_b);
    Py_RETURN_NONE;
}

/* counted_pairs(codes i64 sorted, low i32, high i32, shared i32 or None) -> pairs. The distinct
 * pair codes (low * 2**32 + high), each once, split into its two halves, with how often it
 * occurs; with the outputs None, only counts them (so the caller can allocate them exactly:
 * numpy's unique made four temporaries the size of a report's 40 million codes). */
static PyObject *counted_pairs(PyObject *self, PyObject *args) {
    Py_buffer codes_b, low_b = {0}, high_b = {0}, shared_b = {0};
    PyObject *low_object, *high_object, *shared_object;
    if (!PyArg_ParseTuple(args, "y*OOO", &codes_b, &low_object, &high_object, &shared_object))
        return NULL;
    Py_buffer *all[] = {&codes_b, &low_b, &high_b, &shared_b, NULL};
    int filling = shared_object != Py_None;
    if (filling && (PyObject_GetBuffer(low_object, &low_b, PyBUF_WRITABLE) < 0 ||
                    PyObject_GetBuffer(high_object, &high_b, PyBUF_WRITABLE) < 0 ||
                    PyObject_GetBuffer(shared_object, &shared_b, PyBUF_WRITABLE) < 0)) {
        release(all);
        return NULL;
    }
    const int64_t *codes = codes_b.buf;
    int32_t *low = low_b.buf, *high = high_b.buf, *shared = shared_b.buf;
    Py_ssize_t n = codes_b.len / 8, pairs = 0;
    Py_ssize_t room = filling ? Py_MIN(low_b.len, Py_MIN(high_b.len, shared_b.len)) / 4 : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && codes[i] == codes[i - 1]) {
            if (filling) shared[pairs - 1]++;
            continue;
        }
        if (filling) {
            if (pairs >= room) {
                release(all);
                PyErr_SetString(PyExc_ValueError, "counted_pairs: outputs hold fewer pairs");
                return NULL;
            }
            low[pairs] = (int32_t)(codes[i] >> 32);
            high[pairs] = (int32_t)(codes[i] & 0xFFFFFFFF);
            shared[pairs] = 1;
        }
        pairs++;
    }
    release(all);
    return PyLong_FromSsize_t(pairs);
}

/* --- word numbers ------------------------------------------------------------------------ */

/* A distinct word: its hash, and where its code points are in the words' own arena. */
typedef struct {
    uint64_t hash;
    int64_t start, length;
} Word;

/* The distinct words seen so far, numbered in order of first sight, their code points copied
 * one after the other into a small arena (comparing with a word's first place in the texts
 * would miss the cache at every word), and an open-addressing table from a word to its
 * number; the table doubles when half full. */
typedef struct {
    Word *words;
    uint32_t *arena;
    int64_t *slots; /* a word's number, -1 for an empty slot */
    Py_ssize_t size, capacity, used;
} Words;

static int words_grow(Words *w) {
    Py_ssize_t capacity = w->capacity ? w->capacity * 2 : 1 << 12;
    Word *words = PyMem_Realloc(w->words, capacity / 2 * sizeof(Word));
    int64_t *slots = PyMem_Malloc(capacity * sizeof(int64_t));
    if (words) w->words = words;
    if (!words || !slots) {
        PyMem_Free(slots);
        return -1;
    }
    memset(slots, 0xFF, capacity * sizeof(int64_t));
    PyMem_Free(w->slots);
    w->slots = slots, w->capacity = capacity;
    for (Py_ssize_t n = 0; n < w->size; n++) {
        uint64_t slot = words[n].hash & (uint64_t)(capacity - 1);
        while (slots[slot] >= 0) slot = (slot + 1) & (uint64_t)(capacity - 1);
        slots[slot] = n;
    }
    return 0;
}

/* The number of the word codes[0..length), numbering it if new; -1 out of memory. */
static int64_t word_number(Words *w, const uint32_t *codes, int64_t length) {
    uint64_t h = 0;
    for (int64_t i = 0; i < length; i++) h = h * MULTIPLIER + codes[i] + 1;
    h = fmix64(h);
    uint64_t mask = (uint64_t)w->capacity - 1, slot = h & mask;
    for (; w->slots[slot] >= 0; slot = (slot + 1) & mask) {
        const Word *word = &w->words[w->slots[slot]];
        if (word->hash == h && word->length == length &&
            !memcmp(w->arena + word->start, codes, (size_t)length * 4))
            return w->slots[slot];
    }
    memcpy(w->arena + w->used, codes, (size_t)length * 4);
    w->words[w->size] = (Word){h, w->used, length};
    w->used += length;
    w->slots[slot] = w->size;
    int64_t number = w->size++;
    if (2 * w->size >= w->capacity && words_grow(w) < 0) return -1;
    return number;
}

/* word_numbers(codes u32, offsets i64, numbers u32 [len(codes)], word_offsets i64
 * [texts + 1]) -> words written. Numbers the words of normalised texts (runs of code points
 * between spaces): equal words get the same number, in order of first sight, so that a word
 * edit distance compares numbers instead of strings. Words are told apart by their code
 * points; the hash only finds their slot. */
static PyObject *word_numbers(PyObject *self, PyObject *args) {
    Py_buffer codes_b, offsets_b, numbers_b, word_offsets_b;
    if (!PyArg_ParseTuple(args, "y*y*w*w*", &codes_b, &offsets_b, &numbers_b, &word_offsets_b))
        return NULL;
    Py_buffer *all[] = {&codes_b, &offsets_b, &numbers_b, &word_offsets_b, NULL};
    const uint32_t *codes = codes_b.buf;
    const int64_t *offsets = offsets_b.buf;
    uint32_t *numbers = numbers_b.buf;
    int64_t *word_offsets = word_offsets_b.buf;
    Py_ssize_t texts = offsets_b.len / 8 - 1, written = 0;
    /* The arena never holds more than the texts: untouched, most of it is never paged in. */
    Words w = {NULL, PyMem_Malloc(codes_b.len + 4), NULL, 0, 0, 0};
    int failed = !w.arena || words_grow(&w) < 0;
    for (Py_ssize_t t = 0; t < texts && !failed; t++) {
        word_offsets[t] = written;
        for (int64_t i = offsets[t], end = offsets[t + 1]; i < end && !failed;) {
            if (codes[i] == 32) {
                i++;
                continue;
            }
            int64_t j = i;
            while (j < end && codes[j] != 32) j++;
            int64_t number = word_number(&w, codes + i, j - i);
            failed = number < 0;
            numbers[written++] = (uint32_t)number;
            i = j;
        }
    }
    word_offsets[texts] = written;
    PyMem_Free(w.words), PyMem_Free(w.arena), PyMem_Free(w.slots);
    release(all);
    if (failed) return PyErr_NoMemory();
    return PyLong_FromSsize_t(written);
}

/* --- word edit distance -------------------------------------------------------------------- */

/* A pattern block's words: its (at most 64) distinct word numbers + 1 (0: an empty slot) in an
 * open-addressing table at most half full, each with the mask of the block's positions that
 * hold it. */
#define BLOCK_SLOTS 128

static inline Py_ssize_t block_slot(const uint32_t *keys, uint32_t key) {
    Py_ssize_t slot = (Py_ssize_t)((key * 0x9E3779B1u) >> 25);
    while (keys[slot] && keys[slot] != key) slot = (slot + 1) & (BLOCK_SLOTS - 1);
    return slot;
}

/* The Levenshtein distance of two sequences of word numbers, by Myers' bit-parallel algorithm
 * over 64-row blocks of the shorter one (Hyyrö's blocked form, as in edlib): n columns of a few
 * word operations per block instead of m * n cells. The common prefix and suffix, most of a
 * near-duplicate pair, are cut first: they do not change the distance. `keys`, `masks`,
 * `positive` and `negative` have room for the blocks of the shorter sequence. */
static int64_t edit_distance(const uint32_t *a, int64_t m, const uint32_t *b, int64_t n,
                             uint32_t *keys, uint64_t *masks, uint64_t *positive,
                             uint64_t *negative) {
    while (m && n && a[0] == b[0]) a++, b++, m--, n--;
    while (m && n && a[m - 1] == b[n - 1]) m--, n--;
    if (m > n) {
        const uint32_t *t = a;
        int64_t tm = m;
        a = b, m = n, b = t, n = tm;
    }
    if (!m) return n;
    int64_t blocks = (m + 63) / 64, score = m, last = (m - 1) % 64;
    memset(keys, 0, blocks * BLOCK_SLOTS * sizeof *keys);
    for (int64_t i = 0; i < m; i++) {
        uint32_t *block = keys + (i / 64) * BLOCK_SLOTS;
        Py_ssize_t slot = block_slot(block, a[i] + 1);
        uint64_t *mask = masks + (i / 64) * BLOCK_SLOTS + slot;
        if (!block[slot]) block[slot] = a[i] + 1, *mask = 0;
        *mask |= 1ULL << (i % 64);
    }
    for (int64_t k = 0; k < blocks; k++) positive[k] = ~0ULL, negative[k] = 0;
    for (int64_t j = 0; j < n; j++) {
        int carry = 1; /* the first row's horizontal difference: row 0 counts the columns */
        for (int64_t k = 0; k < blocks; k++) {
            const uint32_t *block = keys + k * BLOCK_SLOTS;
            Py_ssize_t slot = block_slot(block, b[j] + 1);
            uint64_t eq = block[slot] ? masks[k * BLOCK_SLOTS + slot] : 0;
            uint64_t pv = positive[k], mv = negative[k], xv = eq | mv;
            eq |= carry < 0;
            uint64_t xh = (((eq & pv) + pv) ^ pv) | eq;
            uint64_t ph = mv | ~(xh | pv), mh = pv & xh;
            if (k == blocks - 1) score += (int64_t)((ph >> last) & 1) - (int64_t)((mh >> last) & 1);
            int out = (int)(ph >> 63) - (int)(mh >> 63);
            ph = (ph << 1) | (carry > 0);
            mh = (mh << 1) | (carry < 0);
            positive[k] = mh | ~(xv | ph);
            negative[k] = ph & xv;
            carry = out;
        }
    }
    return score;
}

/* word_edit_distances(numbers u32, word_offsets i64, left i64, right i64, out i64): the
 * Levenshtein distance of the word-number sequences left[i] and right[i] (word_numbers) for
 * many pairs, without the GIL. */
static PyObject *word_edit_distances(PyObject *self, PyObject *args) {
    Py_buffer numbers_b, offsets_b, left_b, right_b, out_b;
    if (!PyArg_ParseTuple(args, "y*y*y*y*w*", &numbers_b, &offsets_b, &left_b, &right_b, &out_b))
        return NULL;
    Py_buffer *all[] = {&numbers_b, &offsets_b, &left_b, &right_b, &out_b, NULL};
    const uint32_t *numbers = numbers_b.buf;
    const int64_t *offsets = offsets_b.buf, *left = left_b.buf, *right = right_b.buf;
    int64_t *out = out_b.buf;
    int64_t blocks = (longest_item(offsets, offsets_b.len / 8 - 1) + 63) / 64 + 1;
    uint32_t *keys = PyMem_Malloc(blocks * BLOCK_SLOTS * sizeof *keys);
    uint64_t *masks = PyMem_Malloc(blocks * BLOCK_SLOTS * sizeof *masks);
    uint64_t *vertical = PyMem_Malloc(2 * blocks * sizeof *vertical);
    if (!keys || !masks || !vertical) {
        PyMem_Free(keys), PyMem_Free(masks), PyMem_Free(vertical);
        release(all);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t p = 0; p < left_b.len / 8; p++) {
        int64_t l = left[p], r = right[p];
        out[p] = edit_distance(numbers + offsets[l], offsets[l + 1] - offsets[l],
                               numbers + offsets[r], offsets[r + 1] - offsets[r], keys, masks,
                               vertical, vertical + blocks);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(keys), PyMem_Free(masks), PyMem_Free(vertical);
    release(all);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"code_points", code_points, METH_VARARGS, NULL},
    {"strings", strings, METH_VARARGS, NULL},
    {"all_marked", all_marked, METH_VARARGS, NULL},
    {"md5_hex", md5_hex, METH_VARARGS, NULL},
    {"md5_digests", md5_digests, METH_VARARGS, NULL},
    {"fold_case", fold_case, METH_VARARGS, NULL},
    {"collapse_separators", collapse_separators, METH_VARARGS, NULL},
    {"sketch", sketch, METH_VARARGS, NULL},
    {"shared_count", shared_count, METH_VARARGS, NULL},
    {"weighted_similarity", weighted_similarity, METH_VARARGS, NULL},
    {"pair_similarities", pair_similarities, METH_VARARGS, NULL},
    {"numeral_runs", numeral_runs, METH_VARARGS, NULL},
    {"numeral_agreement", numeral_agreement, METH_VARARGS, NULL},
    {"shingle_numbers", shingle_numbers, METH_VARARGS, NULL},
    {"document_frequencies", document_frequencies, METH_VARARGS, NULL},
    {"shared_buckets", shared_buckets, METH_VARARGS, NULL},
    {"key_holders", key_holders, METH_VARARGS, NULL},
    {"sorted_search", sorted_search, METH_VARARGS, NULL},
    {"bucket_pairs", bucket_pairs, METH_VARARGS, NULL},
    {"prefix_pairs", prefix_pairs, METH_VARARGS, NULL},
    {"sort_pair_codes", sort_pair_codes, METH_VARARGS, NULL},
    {"counted_pairs", counted_pairs, METH_VARARGS, NULL},
    {"word_numbers", word_numbers, METH_VARARGS, NULL},
    {"word_edit_distances", word_edit_distances, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "neardup's compiled loops (see _kernels.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    for (int i = 0; i < 64; i++) md5_k[i] = (uint32_t)(fabs(sin(i + 1.0)) * 4294967296.0);
    return PyModule_Create(&module);
}
