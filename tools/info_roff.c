/* info_roff.c — `crmm info --roff FILE.so...`: the PLUGINS section of crmm.ini(5), written from
 * the plugins' own descriptors and parameter tables, so that the page cannot drift from them
 * (doc/local.mk runs it over every plugin the build installs). */
#include "build_config.h"
#include <stdio.h>
#include <string.h>
#include <crmm/crmm.h>
#include "info.h"

/* Text as roff: backslashes escaped, a leading '.' or '\'' made literal. */
static void roff_text(const char *s)
{
    if (!s)
        return;
    if (*s == '.' || *s == '\'')
        fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", stdout);
        else if (*s == '-')
            fputs("\\-", stdout);
        else
            putchar(*s);
    }
}

static void roff_plugin(const crmm_plugin *pl)
{
    printf(".SS ");
    roff_text(pl->name);
    printf("\n");
    roff_text(pl->description);
    printf(".\n.br\nUpstream: %s.\n",
           pl->upstream == CRMM_UPSTREAM_REQUIRED ? "required" : pl->upstream == CRMM_UPSTREAM_OPTIONAL ? "optional" : "none");
    if (!pl->params || !pl->params[0].key)
        printf(".br\nParameters: none.\n");
    for (const crmm_param *s = pl->params; s && s->key; s++) {
        printf(".TP\n.B ");
        roff_text(s->key);
        printf("\n(%s; ", crmm_param_type_name(s->type));
        if (s->default_value) {
            printf("default ");
            roff_text(s->default_value);
        } else {
            printf(s->flags & CRMM_PARAM_REQUIRED ? "required" : "unset by default");
        }
        printf(")\n");
        roff_text(s->help);
        if (s->type == CRMM_PARAM_ENUM) {
            printf(" (one of: ");
            roff_text(s->choices);
            printf(")");
        }
        if (s->max)
            printf(" (from %llu to %llu)", (unsigned long long)s->min, (unsigned long long)s->max);
        else if (s->min)
            printf(" (at least %llu)", (unsigned long long)s->min);
        printf("\n");
    }
}

int crmm_info_roff(int nfiles, char **files) { return crmm_info_print_files(nfiles, files, roff_plugin); }
