/* replay_plot.c — `crmm replay --plot FILE.svg`: bytes in use and bytes reserved against the
 * log's event index, one colour per resource (in use solid, reserved dashed), with labelled axes
 * and a legend; plain SVG 1.1 written by hand, so that any browser opens it.
 *
 * A long replay is drawn from at most PLOT_BUCKETS buckets of calls, each as its lowest and its
 * highest value in the order they happened, so that no peak disappears from the picture. */
#include "build_config.h"
#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <crmm/error.h>
#include "text_escape.h"
#include "replay.h"

#define PLOT_W 960.0
#define PLOT_H 540.0
#define PLOT_LEFT 90.0
#define PLOT_RIGHT 250.0   /* room for the legend */
#define PLOT_TOP 50.0
#define PLOT_BOTTOM 60.0
#define PLOT_BUCKETS 1500
#define PLOT_TICKS 5

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                      "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

typedef struct frame {
    double x_max, y_max;       /* data at the right and top edges */
    double unit;               /* bytes per y-axis unit */
} frame;

static double px(const frame *fr, double x) { return PLOT_LEFT + x / fr->x_max * (PLOT_W - PLOT_LEFT - PLOT_RIGHT); }

static double py(const frame *fr, double y)
{
    return PLOT_H - PLOT_BOTTOM - y / fr->y_max * (PLOT_H - PLOT_TOP - PLOT_BOTTOM);
}

/* A step of 1, 2 or 5 times a power of ten that splits `range` into about PLOT_TICKS parts. */
static double nice_step(double range)
{
    double raw = range / PLOT_TICKS, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void series(FILE *f, const frame *fr, const replay_result *r, const uint64_t *v, const char *colour,
                   bool dashed)
{
    fprintf(f, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"",
            dashed ? "reserved" : "in-use", colour, dashed ? " stroke-dasharray=\"6,3\"" : "");
    size_t n = r->points, buckets = n > 2 * PLOT_BUCKETS ? PLOT_BUCKETS : n;
    for (size_t b = 0; b < buckets; b++) {
        size_t from = b * n / buckets, to = (b + 1) * n / buckets, lo = from, hi = from;
        for (size_t k = from; k < to; k++) {
            if (v[k] < v[lo])
                lo = k;
            if (v[k] > v[hi])
                hi = k;
        }
        size_t first = lo < hi ? lo : hi, second = lo < hi ? hi : lo;
        fprintf(f, "%.1f,%.1f ", px(fr, (double)r->x[first]), py(fr, (double)v[first]));
        if (second != first)
            fprintf(f, "%.1f,%.1f ", px(fr, (double)r->x[second]), py(fr, (double)v[second]));
    }
    fputs("\"/>\n", f);
}

static void axes(FILE *f, const frame *fr, const char *unit_name)
{
    double x0 = PLOT_LEFT, x1 = PLOT_W - PLOT_RIGHT, y0 = PLOT_H - PLOT_BOTTOM, y1 = PLOT_TOP;
    fprintf(f, "<g stroke=\"#000\" stroke-width=\"1\">\n<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n</g>\n", x0, y0, x1, y0, x0, y0, x0, y1);
    fputs("<g font-family=\"sans-serif\" font-size=\"12\" fill=\"#000\">\n", f);
    double step = fmax(1.0, nice_step(fr->x_max)); /* event indices are whole */
    for (double x = 0; x <= fr->x_max * 1.0000001; x += step)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                px(fr, x), y0, px(fr, x), y0 + 5, px(fr, x), y0 + 20, x);
    double ystep = nice_step(fr->y_max / fr->unit);
    for (double y = 0; y <= fr->y_max / fr->unit * 1.0000001; y += ystep)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ccc\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                x0, py(fr, y * fr->unit), x1, py(fr, y * fr->unit), x0 - 6, py(fr, y * fr->unit) + 4, y);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">event index in the log</text>\n",
            (x0 + x1) / 2, PLOT_H - 15);
    fprintf(f, "<text x=\"20\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 20 %.1f)\">bytes (%s)</text>\n",
            (y0 + y1) / 2, (y0 + y1) / 2, unit_name);
    fputs("</g>\n", f);
}

static void legend(FILE *f, const replay_row *rows, size_t nrows)
{
    double x = PLOT_W - PLOT_RIGHT + 20, y = PLOT_TOP + 10;
    fputs("<g font-family=\"sans-serif\" font-size=\"12\" fill=\"#000\">\n", f);
    for (size_t i = 0; i < nrows; i++) {
        const char *c = colours[i % (sizeof colours / sizeof *colours)];
        for (int dashed = 0; dashed < 2; dashed++, y += 20) {
            if (!dashed || rows[i].result.reserved_known) /* no sample of a line not drawn */
                fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>",
                        x, y, x + 30, y, c, dashed ? " stroke-dasharray=\"6,3\"" : "");
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 38, y + 4);
            text_write_xml_text(f, rows[i].label);
            fputs(dashed ? (rows[i].result.reserved_known ? " reserved" : " reserved: n/a") : " in use", f);
            fputs("</text>\n", f);
        }
    }
    fputs("</g>\n", f);
}

crmm_status replay_plot_svg(const char *path, const char *title, size_t events, const replay_row *rows,
                            size_t nrows)
{
    char tmp[4200]; /* written whole, then renamed over path: a failed write leaves what was there */
    FILE *f;
    if (replay_output_fopen(path, "w", tmp, sizeof tmp, &f) != CRMM_OK)
        return crmm_last_status();
    frame fr = {events > 1 ? (double)events - 1 : 1.0, 1.0, 1.0};
    for (size_t i = 0; i < nrows; i++)
        for (size_t k = 0; k < rows[i].result.points; k++) {
            const replay_result *r = &rows[i].result;
            double top = (double)(r->reserved_known && r->reserved[k] > r->in_use[k] ? r->reserved[k] : r->in_use[k]);
            if (top > fr.y_max)
                fr.y_max = top;
        }
    static const char *const unit_names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (u < 4 && fr.y_max / fr.unit >= 1024 * 1.5) {
        fr.unit *= 1024;
        u++;
    }
    fr.y_max = ceil(fr.y_max / fr.unit / nice_step(fr.y_max / fr.unit)) * nice_step(fr.y_max / fr.unit) * fr.unit;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n<title>",
            PLOT_W, PLOT_H, PLOT_W, PLOT_H);
    text_write_xml_text(f, title);
    fprintf(f, "</title>\n<text x=\"%.1f\" y=\"28\" font-family=\"sans-serif\" font-size=\"15\" "
            "text-anchor=\"middle\">", (PLOT_LEFT + PLOT_W - PLOT_RIGHT) / 2);
    text_write_xml_text(f, title);
    fputs("</text>\n", f);
    axes(f, &fr, unit_names[u]);
    for (size_t i = 0; i < nrows; i++) {
        const replay_result *r = &rows[i].result;
        const char *c = colours[i % (sizeof colours / sizeof *colours)];
        fprintf(f, "<g id=\"resource-%zu\">\n", i);
        series(f, &fr, r, r->in_use, c, false);
        if (r->reserved_known)
            series(f, &fr, r, r->reserved, c, true);
        fputs("</g>\n", f);
    }
    legend(f, rows, nrows);
    fputs("</svg>\n", f);
    return replay_output_close(f, tmp, path, "");
}
