/* Token ids to the bytes they stand for; see openai_token_text.h. */
#include "http/openai_token_text.h"

#include <stdlib.h>
#include <string.h>

#include "cinfer/tokenizer.h"

/* Reads one UTF-8 code point of s[0..n); returns its length, 0 when invalid. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (len == 0 || (len == 3 && s[0] > 0xef) || n < len)
        return 0;
    uint32_t c = s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) || (len == 4 && (c < 0x10000 || c > 0x10ffff)))
        return 0;
    *cp = c;
    return len;
}

/* GPT-2's byte table, backwards: printable bytes stand for themselves; the 68 others
 * (0-32, 127-160, 173) were moved to U+0100.. in order. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp < 256 || cp >= 256 + 68)
        return -1;
    uint32_t k = cp - 256;
    return k < 33 ? (int)k : k < 67 ? (int)(127 + k - 33) : 173;
}

static int byte_level_piece(const char *piece, char *out, size_t *len)
{
    const unsigned char *s = (const unsigned char *)piece;
    size_t n = strlen(piece), i = 0, o = 0;
    while (i < n && o < OPENAI_TOKEN_MAX_BYTES) {
        uint32_t cp;
        size_t step = utf8_next(s + i, n - i, &cp);
        int b = step ? gpt2_byte(cp) : -1;
        if (b < 0)
            return -1;
        out[o++] = (char)b;
        i += step;
    }
    *len = o;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int sentencepiece_piece(const char *piece, char *out, size_t *len)
{
    size_t n = strlen(piece), i = 0, o = 0;
    if (n == 6 && !strncmp(piece, "<0x", 3) && piece[5] == '>' && hex_digit(piece[3]) >= 0 &&
        hex_digit(piece[4]) >= 0) {
        out[0] = (char)(hex_digit(piece[3]) * 16 + hex_digit(piece[4]));
        *len = 1;
        return 0;
    }
    while (i < n && o < OPENAI_TOKEN_MAX_BYTES) {
        if (n - i >= 3 && !memcmp(piece + i, "\xe2\x96\x81", 3)) { /* U+2581 */
            out[o++] = ' ';
            i += 3;
        } else {
            out[o++] = piece[i++];
        }
    }
    *len = o;
    return 0;
}

void cinfer_openai_token_bytes(const struct cinfer_tokenizer_ctx *tok, int32_t id, char *bytes, size_t *len)
{
    *len = 0;
    if (!tok || !tok->ops)
        return;
    struct cinfer_tokenizer_info info;
    tok->ops->info(tok->tok, &info);
    if (id < 0 || (uint32_t)id >= info.vocab_size)
        return;
    const char *piece = tok->ops->id_to_piece(tok->tok, id);
    int special = tok->ops->is_special && tok->ops->is_special(tok->tok, id);
    if (piece && !special && info.model_type) {
        if (!strcmp(info.model_type, "byte_level_bpe") && byte_level_piece(piece, bytes, len) == 0)
            return;
        if (!strcmp(info.model_type, "sentencepiece_bpe") && sentencepiece_piece(piece, bytes, len) == 0)
            return;
    }
    char *text = NULL;
    size_t text_len = 0;
    struct cinfer_error err = {0};
    if (tok->ops->decode(tok->tok, &id, 1, 0, &text, &text_len, &err) == CINFER_OK) {
        *len = text_len < OPENAI_TOKEN_MAX_BYTES ? text_len : OPENAI_TOKEN_MAX_BYTES;
        memcpy(bytes, text, *len);
    }
    free(text);
}

json_t *cinfer_openai_token_string(const char *bytes, size_t len)
{
    char out[OPENAI_TOKEN_MAX_BYTES * 3]; /* each byte becomes at most U+FFFD's 3 bytes */
    size_t o = 0, i = 0;
    while (i < len) {
        uint32_t cp;
        size_t step = utf8_next((const unsigned char *)bytes + i, len - i, &cp);
        if (step) {
            memcpy(out + o, bytes + i, step);
            o += step;
            i += step;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    return json_stringn(out, o);
}

json_t *cinfer_openai_token_byte_array(const char *bytes, size_t len)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < len; i++)
        json_array_append_new(a, json_integer((unsigned char)bytes[i]));
    return a;
}
