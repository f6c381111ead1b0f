/* info_markdown.c — `crmm info --markdown FILE.so...`: the README's plugin table, one row per
 * plugin, written from the plugins' own descriptors and parameter rows (tests/check_readme.sh
 * fails when the README's table is not what this prints). */
#include "build_config.h"
#include <stdio.h>
#include <crmm/crmm.h>
#include "info.h"

/* Text in a table cell: a '|' would end the cell. */
static void cell_text(const char *s)
{
    for (; s && *s; s++) {
        if (*s == '|')
            putchar('\\');
        putchar(*s);
    }
}

static void markdown_plugin(const crmm_plugin *pl)
{
    printf("| `%s` | %s | ", pl->name,
           pl->upstream == CRMM_UPSTREAM_REQUIRED ? "required" : pl->upstream == CRMM_UPSTREAM_OPTIONAL ? "optional" : "none");
    cell_text(pl->description);
    printf(" | ");
    if (!pl->params || !pl->params[0].key)
        printf("—");
    for (const crmm_param *s = pl->params; s && s->key; s++) {
        printf("%s`%s` (", s == pl->params ? "" : ", ", s->key);
        if (s->default_value) {
            printf("`");
            cell_text(s->default_value);
            printf("`");
        } else {
            printf(s->flags & CRMM_PARAM_REQUIRED ? "required" : "unset");
        }
        if (s->type == CRMM_PARAM_ENUM) { /* "a|b" as "one of a/b": a '|' would end the cell */
            printf("; one of ");
            for (const char *c = s->choices; c && *c; c++)
                putchar(*c == '|' ? '/' : *c);
        }
        printf(")");
    }
    printf(" |\n");
}

int crmm_info_markdown(int nfiles, char **files) { return crmm_info_print_files(nfiles, files, markdown_plugin); }
