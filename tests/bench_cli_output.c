/* bench_cli_output.c — what the `crmm bench` suites share (bench_cli_output.h). */
#include "build_config.h"
#include <stdbool.h>
#include "bench_cli_output.h"

const char *const cli_config = "[crmm]\ndefault = q ; names a skipped resource: blanked\n"
                               "[resource.h]\nplugin = host\n"
                               "[resource.t]\nplugin = template\nupstream = h\n"
                               "[resource.p]\nplugin = nosuchplugin\nupstream = h\n"
                               "[resource.q]\nplugin = template\nupstream = p\n"
                               "[device.0]\nresource = q\n";

bench_workload steps_workload(uint64_t steps, uint32_t live, uint64_t max_size)
{
    return (bench_workload){.mode = BENCH_MODE_STEPS, .steps = steps, .max_live = live, .max_size = max_size};
}

/* Run `crmm bench ARGS...` (NULL-terminated) in-process. */
crmm_test_output run_cli(const char *first, ...)
{
    char *argv[64] = {(char *)"bench"};
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    return crmm_test_run_main(bench_cli_main, argv);
}

/* The line of `text` that starts with the words `a` and `b` (separated by blanks), or NULL. */
const char *find_row(const char *text, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, a, la) != 0 || !isblank((unsigned char)line[la]))
            continue;
        const char *p = line + la;
        while (isblank((unsigned char)*p))
            p++;
        if (strncmp(p, b, lb) == 0 && isblank((unsigned char)p[lb]))
            return line;
    }
    return NULL;
}

/* Count CSV fields of one line (quotes respected). */
int csv_fields(const char *line, size_t len)
{
    int n = 1;
    bool quoted = false;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '"')
            quoted = !quoted;
        else if (line[i] == ',' && !quoted)
            n++;
    }
    ck_assert_msg(!quoted, "unbalanced quotes in CSV line");
    return n;
}

const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *json_string_end(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\' && !*++p)
            return NULL;
    }
    return *p == '"' ? p + 1 : NULL;
}

const char *json_value(const char *p)
{
    p = json_ws(p);
    if (*p == '"')
        return json_string_end(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = json_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                p = json_string_end(json_ws(p));
                if (!p || *(p = json_ws(p)) != ':')
                    return NULL;
                p++;
            }
            if (!(p = json_value(p)))
                return NULL;
            p = json_ws(p);
            if (*p == close)
                return p + 1;
            if (*p++ != ',')
                return NULL;
        }
    }
    if (strncmp(p, "null", 4) == 0 || strncmp(p, "true", 4) == 0)
        return p + 4;
    if (strncmp(p, "false", 5) == 0)
        return p + 5;
    char *end;
    strtod(p, &end);
    return end > p ? end : NULL;
}

void expect_usage_error(const char *what, crmm_test_output r)
{
    ck_assert_msg(r.status == 2, "%s: exit %d (expected 2)", what, r.status);
    ck_assert_msg(strncmp(r.err, "crmm bench: ", 12) == 0, "%s: message: %s", what, r.err);
    ck_assert_str_eq(r.out, "");
    crmm_test_output_free(&r);
}
