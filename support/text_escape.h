/* text_escape.h — strings written into JSON, XML and CSV outputs, whatever bytes they hold: names,
 * paths and environment values come from users and need not be UTF-8. */
#ifndef CRMM_SUPPORT_TEXT_ESCAPE_H
#define CRMM_SUPPORT_TEXT_ESCAPE_H

#include <stdio.h>

/* Write s as a JSON string: quotes, backslashes and control characters escaped, every byte that
 * is not part of well-formed UTF-8 written as \ufffd (U+FFFD); NULL as null. Every JSON output of
 * crmm (bench, info, replay) writes its strings through this. */
void text_write_json_string(FILE *f, const char *s);

/* Write s as XML character data (element text or an attribute value): <, >, &, " as entities,
 * control characters other than tab, newline and carriage return left out (XML 1.0 has no way
 * to write them), bytes that are not well-formed UTF-8 and U+FFFE/U+FFFF as &#xFFFD;. */
void text_write_xml_text(FILE *f, const char *s);

/* Write s as one CSV field: quoted (with "" for a quote, line breaks as blanks) when it holds a
 * comma, quote or line break; NULL or "" as nothing. */
void text_write_csv_field(FILE *f, const char *s);

#endif
