/* How a verb's result is shown: -o json, yaml or name (one document, printed by
 * output_print), and whether colour and the live redraw go to a terminal
 * (--color=auto|always|never, NO_COLOR, TERM=dumb). Process-wide: set once by the
 * global flags before any verb starts. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>

enum output_doc {
        OUTPUT_DOC_JSON,
        OUTPUT_DOC_YAML,
        OUTPUT_DOC_NAME, /* node/NAME per node, as kubectl's -o name */
        _OUTPUT_DOC_MAX,
        _OUTPUT_DOC_INVALID = -22,
};

enum output_color {
        OUTPUT_COLOR_AUTO,
        OUTPUT_COLOR_ALWAYS,
        OUTPUT_COLOR_NEVER,
        _OUTPUT_COLOR_MAX,
        _OUTPUT_COLOR_INVALID = -22,
};

enum output_doc output_doc_from_string(const char *s);
enum output_color output_color_from_string(const char *s);
void output_set_doc(enum output_doc d);
void output_set_color(enum output_color c);

/* Whether fd gets the live redraw (cursor movement, clearing): --color=always, or
 * with auto a terminal whose TERM is set and not "dumb". */
bool output_live(int fd);
/* Whether fd gets colour: as output_live(), and with auto also not when NO_COLOR is
 * set to anything but "" (no-color.org; --color=always wins over it). */
bool output_color(int fd);
/* The SGR escape sgr ("\033[1m") when fd gets colour, else "". */
const char *output_sgr(int fd, const char *sgr);

/* Prints the document j on stdout as -o said: JSON (indented, or one line when
 * compact: a stream of documents), YAML (the same document emitted by libyaml; with
 * compact each document opens with "---"), or name (node/NAME for the document's node,
 * or for each of its items). Returns 0, or a negative errno (logged). */
int output_print(const cJSON *j, bool compact);
