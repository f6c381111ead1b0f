/* text_escape.c — JSON strings, XML text and CSV fields from arbitrary bytes (text_escape.h). */
#include "build_config.h"
#include <stddef.h>
#include <string.h>
#include "text_escape.h"

/* The length (2..4) of the well-formed UTF-8 sequence of a non-ASCII character at s, or 0 when
 * the bytes there are not one (a stray continuation byte, an overlong form, a surrogate, a code
 * point past U+10FFFF, a sequence cut short), as RFC 3629 defines it. */
static size_t utf8_sequence_length(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong below */
        else if (c == 0xED)
            hi = 0x9F; /* UTF-16 surrogates above */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF above */
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0; /* a NUL ends the string here too */
    return n;
}

void text_write_json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p >= 0x80) {
            size_t n = utf8_sequence_length(p);
            if (n) {
                fwrite(p, 1, n, f);
                p += n;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7F)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
        p++;
    }
    fputc('"', f);
}

void text_write_xml_text(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (*p >= 0x80) {
            size_t n = utf8_sequence_length(p);
            /* U+FFFE and U+FFFF (EF BF BE, EF BF BF) are no XML characters either */
            if (n && !(n == 3 && p[0] == 0xEF && p[1] == 0xBF && p[2] >= 0xBE)) {
                fwrite(p, 1, n, f);
                p += n;
            } else {
                fputs("&#xFFFD;", f);
                p++;
            }
            continue;
        }
        switch (*p) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if (*p >= 0x20 || *p == '\t' || *p == '\n' || *p == '\r')
                fputc(*p, f);
        }
        p++;
    }
}

void text_write_csv_field(FILE *f, const char *s)
{
    if (!s || !*s)
        return;
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}
