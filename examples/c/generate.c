/* Generates one image with a Z-Image pipeline and writes it as a PNG.
 *   cn_generate_png <model_dir> <prompt> <out.png> [width height [steps [seed]]]
 * CPU, fp32; width/height default to 1024 (multiples of the model's image_size_multiple), steps and guidance to
 * the model's (8 and 0 = no CFG for Z-Image Turbo), seed to 0. Exit status 0 on success, 1 on a cutenative or I/O
 * error (the status and message are printed), 2 on usage. */
#include <stdio.h>
#include <stdlib.h>

#include "cutenative.h"

/* ---- a minimal PNG writer: 8-bit RGB, no filter, one IDAT holding a zlib stream of stored (uncompressed)
 * deflate blocks. Stored blocks keep the example free of a zlib dependency; the file is as big as the pixels. */

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; ++n) {
        uint32_t c = n;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

/* Writes bytes and runs them through the chunk's CRC-32 (kept un-finalised: start at ~0, end with ~crc). */
static int put(FILE* f, const uint8_t* p, size_t n, uint32_t* crc) {
    for (size_t i = 0; i < n; ++i) *crc = crc_table[(*crc ^ p[i]) & 0xFF] ^ (*crc >> 8);
    return fwrite(p, 1, n, f) == n;
}

static int put_u32(FILE* f, uint32_t v, uint32_t* crc) {
    const uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    return put(f, b, 4, crc);
}

/* A chunk: its length (outside the CRC), its type and data (inside), then the CRC. */
static int chunk_begin(FILE* f, uint32_t length, const char* type, uint32_t* crc) {
    uint32_t outside = 0;
    *crc = ~0u;
    return put_u32(f, length, &outside) && put(f, (const uint8_t*)type, 4, crc);
}

static int chunk_end(FILE* f, uint32_t crc) {
    uint32_t outside = 0;
    return put_u32(f, ~crc, &outside);
}

static int write_png(const char* path, const uint8_t* rgb, uint32_t w, uint32_t h) {
    const size_t row = (size_t)w * 3 + 1, raw = row * h; /* each row: filter type 0 (none), then its pixels */
    const size_t blocks = raw / 65535 + (raw % 65535 != 0), idat = 2 + blocks * 5 + raw + 4;
    if (idat > 0x7FFFFFFFu) return 0; /* a chunk holds at most 2^31 - 1 bytes */
    FILE* f = fopen(path, "wb");
    if (!f) return 0;
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    const uint8_t ihdr_rest[5] = {8, 2, 0, 0, 0}; /* bit depth 8, colour type 2 (RGB), deflate, no filter, no interlace */
    const uint8_t zlib_header[2] = {0x78, 0x01};  /* deflate with a 32 KiB window, no dictionary; 0x7801 % 31 == 0 */
    uint32_t crc = 0, a = 1, b = 0;               /* a, b: the Adler-32 of the raw bytes */
    size_t left = raw, in_row = 0, y = 0;
    int ok = fwrite(sig, 1, 8, f) == 8 && chunk_begin(f, 13, "IHDR", &crc) && put_u32(f, w, &crc) && put_u32(f, h, &crc) &&
             put(f, ihdr_rest, 5, &crc) && chunk_end(f, crc);
    ok = ok && chunk_begin(f, (uint32_t)idat, "IDAT", &crc) && put(f, zlib_header, 2, &crc);
    while (ok && left > 0) {
        const uint16_t len = (uint16_t)(left < 65535 ? left : 65535), nlen = (uint16_t)~len;
        /* Block header: BFINAL on the last block, BTYPE 00 (stored), then LEN and its complement, little-endian. */
        const uint8_t header[5] = {(uint8_t)(left == len), (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)nlen, (uint8_t)(nlen >> 8)};
        ok = put(f, header, 5, &crc);
        for (size_t done = 0; ok && done < len;) {
            /* The next run of raw bytes: a row's filter byte, or as much of the row's pixels as the block holds. */
            static const uint8_t filter_none = 0;
            const uint8_t* p = in_row == 0 ? &filter_none : rgb + y * (row - 1) + (in_row - 1);
            size_t n = in_row == 0 ? 1 : row - in_row;
            if (n > (size_t)len - done) n = (size_t)len - done;
            for (size_t i = 0; i < n; ++i) {
                a = (a + p[i]) % 65521u;
                b = (b + a) % 65521u;
            }
            ok = put(f, p, n, &crc);
            done += n;
            in_row += n;
            if (in_row == row) {
                in_row = 0;
                ++y;
            }
        }
        left -= len;
    }
    ok = ok && put_u32(f, (b << 16) | a, &crc) && chunk_end(f, crc); /* zlib ends with the Adler-32, big-endian */
    ok = ok && chunk_begin(f, 0, "IEND", &crc) && chunk_end(f, crc);
    return (fclose(f) == 0) && ok;
}

/* ---- generation ---- */

static int fail(cn_error* err, const char* what) {
    fprintf(stderr, "%s: %s: %s\n", what, cn_status_name(cn_error_status(err)), cn_error_message(err));
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 4 && argc != 6 && argc != 7 && argc != 8) {
        fprintf(stderr, "usage: %s <model_dir> <prompt> <out.png> [width height [steps [seed]]]\n", argv[0]);
        return 2;
    }
    const int32_t width = argc > 4 ? (int32_t)atoi(argv[4]) : 1024, height = argc > 5 ? (int32_t)atoi(argv[5]) : 1024;
    const int32_t steps = argc > 6 ? (int32_t)atoi(argv[6]) : CN_GENERATE_DEFAULT_STEPS;
    const uint64_t seed = argc > 7 ? strtoull(argv[7], NULL, 10) : 0;
    crc_init();

    cn_error* err = NULL;
    cn_model* model = NULL;
    cn_generate_request* req = NULL;
    cn_run_options* opts = NULL;
    uint8_t* rgb = NULL;
    size_t bytes = 0;
    int rc = 1;
    if (cn_error_create(&err) != CN_STATUS_OK) return 1;
    if (cn_model_create(argv[1], NULL, &model, err) != CN_STATUS_OK) {
        rc = fail(err, "cn_model_create");
        goto done;
    }
    cn_model_info info;
    cn_model_info_init(&info);
    if (cn_model_get_info(model, &info, err) != CN_STATUS_OK) {
        rc = fail(err, "cn_model_get_info");
        goto done;
    }
    if (cn_generate_request_create(&req, err) != CN_STATUS_OK || cn_generate_request_set_prompt(req, argv[2], NULL, err) != CN_STATUS_OK ||
        cn_generate_request_set_size(req, width, height, err) != CN_STATUS_OK ||
        cn_generate_request_set_steps(req, steps, CN_GENERATE_DEFAULT_GUIDANCE, err) != CN_STATUS_OK) {
        rc = fail(err, "request");
        goto done;
    }
    if (cn_generate_get_size(model, req, &bytes, err) != CN_STATUS_OK) { /* checks the size multiple */
        rc = fail(err, "cn_generate_get_size");
        goto done;
    }
    if (cn_run_options_create(&opts, err) != CN_STATUS_OK || cn_run_options_set_seed(opts, seed, err) != CN_STATUS_OK) {
        rc = fail(err, "run options");
        goto done;
    }
    rgb = (uint8_t*)malloc(bytes);
    if (!rgb) {
        fprintf(stderr, "out of memory for %zu bytes\n", bytes);
        goto done;
    }
    if (cn_generate(model, req, opts, rgb, bytes, err) != CN_STATUS_OK) {
        rc = fail(err, "cn_generate");
        goto done;
    }
    uint64_t step_done = 0, step_total = 0;
    if (cn_run_options_get_progress(opts, &step_done, &step_total, err) != CN_STATUS_OK) {
        rc = fail(err, "cn_run_options_get_progress");
        goto done;
    }
    if (!write_png(argv[3], rgb, (uint32_t)width, (uint32_t)height)) {
        perror(argv[3]);
        goto done;
    }
    printf("wrote %s: %dx%d, %llu/%llu steps, guidance %g, seed %llu (%s, size multiple %lld)\n", argv[3], (int)width, (int)height,
           (unsigned long long)step_done, (unsigned long long)step_total, (double)info.default_guidance, (unsigned long long)seed,
           cn_model_kind_name((cn_model_kind)info.kind), (long long)info.image_size_multiple);
    rc = 0;
done:
    free(rgb);
    cn_run_options_free(opts);
    cn_generate_request_free(req);
    cn_model_free(model);
    cn_error_free(err);
    return rc;
}
