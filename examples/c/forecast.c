/* Forecasts every numeric column of a CSV file and prints the quantiles.
 *   cn_forecast_csv <model_dir> <csv> <horizon> [levels] [--device cpu|cuda] [--dtype f32|bf16|f16]
 * `levels` is a comma-separated list of quantile levels, e.g. 0.1,0.5,0.9 (default: the model's own).
 *
 * The CSV has a header row. The first column is a label column (timestamps, names) and is skipped when any
 * of its cells is not a number; every other column is one univariate series (group -1). An empty cell, NA
 * or NaN is a missing value. Quoted fields ("a,b", "say ""hi""") are read as Python's csv module reads them
 * with strict=True; a quoted field may not span lines. Blank lines are skipped.
 *
 * Output (stdout), one header line and then one line per series and horizon step:
 *   series step q<level1> q<level2> ...
 *   <column name> <step 1..horizon> <value1> <value2> ...
 * Floats are printed with %.6g; examples/python/forecast_ctypes.py prints exactly the same.
 *
 * Exit status 0 on success, 1 on a cutenative error (its status and message are printed), 2 on usage or
 * CSV errors. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cutenative.h"

#define MAX_LINE 65536        /* bytes per CSV line, line terminator excluded */
#define MAX_COLUMNS 1024      /* fields per CSV row */
#define MAX_VALUES (1u << 24) /* numeric cells in the whole file (64 MiB of floats) */
#define MAX_LEVELS 256        /* quantile levels on the command line */
#define MAX_HORIZON 1000000   /* the model's max_horizon is the real limit; this only bounds parsing */

static const char* g_prog = "cn_forecast_csv";

static void usage(void) {
    fprintf(stderr,
            "usage: %s <model_dir> <csv> <horizon> [levels, e.g. 0.1,0.5,0.9] [--device cpu|cuda] "
            "[--dtype f32|bf16|f16]\n",
            g_prog);
}

/* ---- CSV ------------------------------------------------------------------------------------------ */

typedef struct csv_table {
    size_t n_cols; /* fields per row (from the header) */
    char** names;  /* n_cols header names, sanitised */
    size_t n_rows; /* data rows */
    size_t cap_rows;
    float* cells;      /* n_rows * n_cols, row-major; column 0 is NaN where it is not a number */
    int col0_is_label; /* column 0 holds a cell that is not a number */
} csv_table;

static void csv_table_free(csv_table* t) {
    if (t->names) {
        for (size_t i = 0; i < t->n_cols; ++i) free(t->names[i]);
    }
    free(t->names);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

/* Reads one line (without its "\n" or "\r\n") into buf[MAX_LINE + 1]. Returns 1 for a line, 0 at end of
 * file, -1 on an error (message printed). */
static int read_line(FILE* f, char* buf, size_t* len_out, size_t line_no, const char* path) {
    size_t len = 0;
    int c = EOF;
    int any = 0;
    while ((c = getc(f)) != EOF) {
        any = 1;
        if (c == '\n') break;
        if (c == '\0') {
            fprintf(stderr, "%s:%zu: NUL byte in line\n", path, line_no);
            return -1;
        }
        if (len == MAX_LINE) {
            fprintf(stderr, "%s:%zu: line longer than %d bytes\n", path, line_no, MAX_LINE);
            return -1;
        }
        buf[len++] = (char)c;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: read error\n", path);
        return -1;
    }
    if (!any) return 0;
    if (len > 0 && buf[len - 1] == '\r') --len;
    if (memchr(buf, '\r', len) != NULL) {
        fprintf(stderr, "%s:%zu: stray carriage return in line\n", path, line_no);
        return -1;
    }
    buf[len] = '\0';
    *len_out = len;
    return 1;
}

/* Splits a line into fields in place, as Python's csv.reader(strict=True) does with the default dialect.
 * fields[i] point into `line`, which is rewritten (quotes removed, fields NUL-terminated). Returns the
 * number of fields, or -1 on an error (message printed). */
static long split_fields(char* line, size_t len, char** fields, size_t line_no, const char* path) {
    size_t n = 0;
    size_t r = 0, w = 0;
    for (;;) {
        if (n == MAX_COLUMNS) {
            fprintf(stderr, "%s:%zu: more than %d columns\n", path, line_no, MAX_COLUMNS);
            return -1;
        }
        fields[n++] = line + w;
        if (r < len && line[r] == '"') {
            ++r;
            for (;;) {
                if (r == len) {
                    fprintf(stderr, "%s:%zu: unterminated quoted field\n", path, line_no);
                    return -1;
                }
                if (line[r] == '"') {
                    if (r + 1 < len && line[r + 1] == '"') {
                        line[w++] = '"';
                        r += 2;
                        continue;
                    }
                    ++r;
                    break;
                }
                line[w++] = line[r++];
            }
            if (r < len && line[r] != ',') {
                fprintf(stderr, "%s:%zu: ',' expected after the closing '\"' of a quoted field\n", path, line_no);
                return -1;
            }
        } else {
            while (r < len && line[r] != ',') line[w++] = line[r++];
        }
        /* w <= r always holds, and r is at a ',' or at the end: end the field there. */
        if (r == len) {
            line[w] = '\0';
            return (long)n;
        }
        line[w++] = '\0';
        ++r;
    }
}

/* Trims spaces and tabs at both ends, in place. */
static char* trim(char* s) {
    while (*s == ' ' || *s == '\t') ++s;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    return s;
}

static int ascii_ieq(const char* a, const char* b) {
    for (; *a && *b; ++a, ++b) {
        char x = *a, y = *b;
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return 0;
    }
    return *a == *b;
}

/* Whether s (already trimmed) is a plain decimal number: [+-] digits [. digits] [e [+-] digits], with at
 * least one digit before the exponent. No hex, inf, nan, underscores or inner spaces. */
static int is_decimal(const char* s) {
    size_t i = 0, digits = 0;
    if (s[i] == '+' || s[i] == '-') ++i;
    while (s[i] >= '0' && s[i] <= '9') ++i, ++digits;
    if (s[i] == '.') {
        ++i;
        while (s[i] >= '0' && s[i] <= '9') ++i, ++digits;
    }
    if (digits == 0) return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        ++i;
        if (s[i] == '+' || s[i] == '-') ++i;
        size_t exp_digits = 0;
        while (s[i] >= '0' && s[i] <= '9') ++i, ++exp_digits;
        if (exp_digits == 0) return 0;
    }
    return s[i] == '\0';
}

/* Parses a cell. Returns 1 with *out set (NaN for a missing value), 0 if it is not a number, -1 if it is a
 * number outside the float range. */
static int parse_cell(char* cell, float* out) {
    const char* s = trim(cell);
    if (*s == '\0' || ascii_ieq(s, "na") || ascii_ieq(s, "nan")) {
        *out = NAN;
        return 1;
    }
    if (!is_decimal(s)) return 0;
    double v = strtod(s, NULL);
    if (!(fabs(v) <= FLT_MAX)) return -1;
    *out = (float)v;
    return 1;
}

/* A header name fit for one space-separated output token: trimmed, bytes <= 0x20 and 0x7f replaced by '_';
 * "col<k>" (1-based) when empty. NULL when out of memory. */
static char* column_name(char* field, size_t k) {
    const char* s = trim(field);
    char buf[32];
    if (*s == '\0') {
        snprintf(buf, sizeof(buf), "col%zu", k);
        s = buf;
    }
    size_t n = strlen(s);
    char* name = (char*)malloc(n + 1);
    if (!name) return NULL;
    for (size_t i = 0; i < n; ++i) {
        unsigned char c = (unsigned char)s[i];
        name[i] = (c <= 0x20 || c == 0x7f) ? '_' : (char)c;
    }
    name[n] = '\0';
    return name;
}

/* Reads the whole CSV into *t. Returns 0, or 2 on an error (message printed). */
static int read_csv(const char* path, csv_table* t) {
    memset(t, 0, sizeof(*t));
    FILE* f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 2;
    }
    char* line = (char*)malloc(MAX_LINE + 1);
    char** fields = (char**)malloc(MAX_COLUMNS * sizeof(char*));
    int rc = 2;
    if (!line || !fields) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    size_t line_no = 0;
    int have_header = 0;
    for (;;) {
        size_t len = 0;
        int got = read_line(f, line, &len, line_no + 1, path);
        if (got < 0) goto done;
        if (got == 0) break;
        ++line_no;
        if (len == 0) continue; /* blank line */
        long n = split_fields(line, len, fields, line_no, path);
        if (n < 0) goto done;
        if (!have_header) {
            t->names = (char**)calloc((size_t)n, sizeof(char*));
            if (!t->names) {
                fprintf(stderr, "out of memory\n");
                goto done;
            }
            t->n_cols = (size_t)n;
            for (size_t j = 0; j < t->n_cols; ++j) {
                t->names[j] = column_name(fields[j], j + 1);
                if (!t->names[j]) {
                    fprintf(stderr, "out of memory\n");
                    goto done;
                }
            }
            have_header = 1;
            continue;
        }
        if ((size_t)n != t->n_cols) {
            fprintf(stderr, "%s:%zu: %ld fields, but the header has %zu\n", path, line_no, n, t->n_cols);
            goto done;
        }
        if ((t->n_rows + 1) * t->n_cols > MAX_VALUES) {
            fprintf(stderr, "%s:%zu: more than %u cells in the file\n", path, line_no, (unsigned)MAX_VALUES);
            goto done;
        }
        if (t->n_rows == t->cap_rows) {
            size_t cap = t->cap_rows ? 2 * t->cap_rows : 64;
            if (cap * t->n_cols > MAX_VALUES) cap = MAX_VALUES / t->n_cols;
            float* cells = (float*)realloc(t->cells, cap * t->n_cols * sizeof(float));
            if (!cells) {
                fprintf(stderr, "out of memory\n");
                goto done;
            }
            t->cells = cells;
            t->cap_rows = cap;
        }
        float* row = t->cells + t->n_rows * t->n_cols;
        for (size_t j = 0; j < t->n_cols; ++j) {
            int ok = parse_cell(fields[j], &row[j]);
            if (ok < 0) {
                fprintf(stderr, "%s:%zu: column %zu: number outside the float32 range\n", path, line_no, j + 1);
                goto done;
            }
            if (ok == 0) {
                if (j == 0) {
                    t->col0_is_label = 1;
                    row[j] = NAN;
                    continue;
                }
                fprintf(stderr, "%s:%zu: column %zu: not a number\n", path, line_no, j + 1);
                goto done;
            }
        }
        ++t->n_rows;
    }
    if (!have_header) {
        fprintf(stderr, "%s: no header row\n", path);
        goto done;
    }
    if (t->n_rows == 0) {
        fprintf(stderr, "%s: no data rows\n", path);
        goto done;
    }
    if (t->col0_is_label && t->n_cols < 2) {
        fprintf(stderr, "%s: no numeric column\n", path);
        goto done;
    }
    rc = 0;
done:
    free(line);
    free(fields);
    fclose(f);
    if (rc != 0) csv_table_free(t);
    return rc;
}

/* ---- command line ----------------------------------------------------------------------------------- */

/* A horizon: decimal digits only, 1..MAX_HORIZON. */
static int parse_horizon(const char* s, int64_t* out) {
    int64_t v = 0;
    if (*s == '\0') return 0;
    for (; *s; ++s) {
        if (*s < '0' || *s > '9') return 0;
        v = v * 10 + (*s - '0');
        if (v > MAX_HORIZON) return 0;
    }
    if (v < 1) return 0;
    *out = v;
    return 1;
}

/* Comma-separated levels, each a plain decimal number (the library checks the range). */
static int parse_levels(const char* arg, float* levels, size_t* count) {
    size_t n = 0;
    const char* p = arg;
    char tok[64];
    for (;;) {
        const char* comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len >= sizeof(tok) || n == MAX_LEVELS) return 0;
        memcpy(tok, p, len);
        tok[len] = '\0';
        const char* s = trim(tok);
        if (!is_decimal(s)) return 0;
        levels[n++] = (float)strtod(s, NULL);
        if (!comma) break;
        p = comma + 1;
    }
    *count = n;
    return 1;
}

static void print_value(double v) {
    if (isnan(v)) {
        fputs("nan", stdout); /* glibc would print "-nan" for a negative NaN; Python prints "nan" */
    } else {
        printf("%.6g", v);
    }
}

static int fail(cn_error* err) {
    fprintf(stderr, "error %s: %s\n", cn_status_name(cn_error_status(err)), cn_error_message(err));
    return 1;
}

int main(int argc, char** argv) {
    if (argc > 0 && argv[0] && argv[0][0]) g_prog = argv[0];
    const char* pos[4] = {NULL, NULL, NULL, NULL};
    int n_pos = 0;
    const char* device = "cpu";
    const char* dtype = "f32";
    int only_positional = 0;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (!only_positional && strncmp(a, "--", 2) == 0) {
            if (strcmp(a, "--") == 0) {
                only_positional = 1;
            } else if (strcmp(a, "--help") == 0) {
                usage();
                return 0;
            } else if (strcmp(a, "--device") == 0 || strcmp(a, "--dtype") == 0) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "%s needs a value\n", a);
                    usage();
                    return 2;
                }
                if (strcmp(a, "--device") == 0) {
                    device = argv[++i];
                } else {
                    dtype = argv[++i];
                }
            } else if (strncmp(a, "--device=", 9) == 0) {
                device = a + 9;
            } else if (strncmp(a, "--dtype=", 8) == 0) {
                dtype = a + 8;
            } else {
                fprintf(stderr, "unknown option %s\n", a);
                usage();
                return 2;
            }
        } else if (!only_positional && strcmp(a, "-h") == 0) {
            usage();
            return 0;
        } else {
            if (n_pos == 4) {
                fprintf(stderr, "too many arguments\n");
                usage();
                return 2;
            }
            pos[n_pos++] = a;
        }
    }
    if (n_pos < 3) {
        usage();
        return 2;
    }
    int64_t horizon = 0;
    if (!parse_horizon(pos[2], &horizon)) {
        fprintf(stderr, "horizon must be an integer from 1 to %d, not '%s'\n", MAX_HORIZON, pos[2]);
        return 2;
    }
    float user_levels[MAX_LEVELS];
    size_t n_user_levels = 0;
    if (pos[3] && !parse_levels(pos[3], user_levels, &n_user_levels)) {
        fprintf(stderr, "levels must be at most %d comma-separated numbers, e.g. 0.1,0.5,0.9, not '%s'\n", MAX_LEVELS, pos[3]);
        return 2;
    }
    cn_model_params params;
    cn_model_params_init(&params);
    if (strcmp(device, "cpu") == 0) {
        params.device_type = CN_DEVICE_CPU;
    } else if (strcmp(device, "cuda") == 0) {
        params.device_type = CN_DEVICE_CUDA;
    } else {
        fprintf(stderr, "unknown device %s (cpu or cuda)\n", device);
        return 2;
    }
    {
        cn_dtype dt;
        if (cn_dtype_from_name(dtype, &dt) != CN_STATUS_OK) {
            fprintf(stderr, "unknown dtype %s (f32, bf16 or f16)\n", dtype);
            return 2;
        }
        params.dtype = (int32_t)dt;
    }

    uint32_t major = 0, minor = 0;
    cn_abi_version(&major, &minor);
    if (major != CN_ABI_VERSION_MAJOR || minor < CN_ABI_VERSION_MINOR) {
        fprintf(stderr, "libcutenative ABI %u.%u is incompatible with this program's %d.%d\n", major, minor, CN_ABI_VERSION_MAJOR,
                CN_ABI_VERSION_MINOR);
        return 1;
    }

    csv_table table;
    int rc = read_csv(pos[1], &table);
    if (rc != 0) return rc;
    const size_t first = table.col0_is_label ? 1 : 0;
    const size_t n_series = table.n_cols - first;

    cn_error* err = NULL;
    cn_model* model = NULL;
    cn_forecast_request* req = NULL;
    float* column = NULL;
    float* levels = NULL;
    float* out = NULL;
    size_t n_levels = 0;
    rc = 1;
    if (cn_error_create(&err) != CN_STATUS_OK) {
        fprintf(stderr, "error: cannot create an error object\n");
        goto done;
    }
    if (cn_model_create(pos[0], &params, &model, err) != CN_STATUS_OK) {
        rc = fail(err);
        goto done;
    }
    if (cn_forecast_request_create(&req, err) != CN_STATUS_OK) {
        rc = fail(err);
        goto done;
    }
    column = (float*)malloc(table.n_rows * sizeof(float));
    if (!column) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    for (size_t j = first; j < table.n_cols; ++j) {
        for (size_t r = 0; r < table.n_rows; ++r) column[r] = table.cells[r * table.n_cols + j];
        if (cn_forecast_request_add_series(req, column, table.n_rows, -1, NULL, err) != CN_STATUS_OK) {
            rc = fail(err);
            goto done;
        }
    }
    if (cn_forecast_request_set_horizon(req, horizon, err) != CN_STATUS_OK) {
        rc = fail(err);
        goto done;
    }
    if (n_user_levels > 0) {
        if (cn_forecast_request_set_quantiles(req, user_levels, n_user_levels, err) != CN_STATUS_OK) {
            rc = fail(err);
            goto done;
        }
        n_levels = n_user_levels;
        levels = (float*)malloc(n_levels * sizeof(float));
        if (!levels) {
            fprintf(stderr, "out of memory\n");
            goto done;
        }
        memcpy(levels, user_levels, n_levels * sizeof(float));
    } else {
        if (cn_model_get_quantiles(model, NULL, 0, &n_levels, err) != CN_STATUS_OK) {
            rc = fail(err);
            goto done;
        }
        levels = (float*)malloc((n_levels ? n_levels : 1) * sizeof(float));
        if (!levels) {
            fprintf(stderr, "out of memory\n");
            goto done;
        }
        if (cn_model_get_quantiles(model, levels, n_levels, &n_levels, err) != CN_STATUS_OK) {
            rc = fail(err);
            goto done;
        }
    }

    cn_forecast_shape shape;
    cn_forecast_shape_init(&shape);
    if (cn_forecast_get_shape(model, req, &shape, err) != CN_STATUS_OK) {
        rc = fail(err);
        goto done;
    }
    if (shape.n_series != n_series || shape.horizon != (uint64_t)horizon || shape.n_outputs != n_levels ||
        shape.n_values != shape.n_series * shape.n_outputs * shape.horizon || shape.n_values > SIZE_MAX / sizeof(float)) {
        fprintf(stderr,
                "error: unexpected forecast shape: %llu series x %llu outputs x %llu steps (%llu values) for %zu "
                "series, %zu quantile levels and horizon %lld\n",
                (unsigned long long)shape.n_series, (unsigned long long)shape.n_outputs, (unsigned long long)shape.horizon,
                (unsigned long long)shape.n_values, n_series, n_levels, (long long)horizon);
        goto done;
    }
    out = (float*)malloc(shape.n_values ? (size_t)shape.n_values * sizeof(float) : sizeof(float));
    if (!out) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    if (cn_forecast(model, req, NULL, out, (size_t)shape.n_values, NULL, 0, err) != CN_STATUS_OK) {
        rc = fail(err);
        goto done;
    }

    /* out is [series][quantile][step]. */
    printf("series step");
    for (size_t q = 0; q < n_levels; ++q) {
        printf(" q");
        print_value(levels[q]);
    }
    printf("\n");
    for (size_t s = 0; s < n_series; ++s) {
        for (uint64_t h = 0; h < shape.horizon; ++h) {
            printf("%s %llu", table.names[first + s], (unsigned long long)(h + 1));
            for (size_t q = 0; q < n_levels; ++q) {
                putchar(' ');
                print_value(out[(s * n_levels + q) * shape.horizon + h]);
            }
            putchar('\n');
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "error: cannot write the output\n");
        goto done;
    }
    rc = 0;
done:
    free(out);
    free(levels);
    free(column);
    cn_forecast_request_free(req);
    cn_model_free(model);
    cn_error_free(err);
    csv_table_free(&table);
    return rc;
}
