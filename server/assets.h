/* assets.h - files embedded into the binary at build time (tools/embed.c):
 * the playground page (web/) and the OpenAPI document (docs/openapi.yaml). */
#ifndef ATTN_ASSETS_H
#define ATTN_ASSETS_H

#include <stddef.h>

typedef struct attn_asset {
    const char *name;          /* base name, e.g. "index.html" */
    const unsigned char *data; /* NUL-terminated for convenience */
    size_t len;                /* bytes, without the NUL */
} attn_asset;

extern const attn_asset attn_assets[]; /* ends with a NULL name */

#endif
