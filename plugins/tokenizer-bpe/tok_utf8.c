/* UTF-8: validation, WHATWG replacement of invalid bytes, and GPT-2's byte alphabet. */
#include <pthread.h>
#include <string.h>
#include <utf8proc.h>

#include "tok.h"

/* The range the byte after lead must fall in (WHATWG's "UTF-8 lower/upper boundary"),
 * and how many continuation bytes follow; 0 continuation bytes means invalid lead. */
static int lead_info(uint8_t lead, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF)
        return 1;
    if (lead >= 0xE0 && lead <= 0xEF) {
        if (lead == 0xE0)
            *lo = 0xA0;
        if (lead == 0xED)
            *hi = 0x9F;
        return 2;
    }
    if (lead >= 0xF0 && lead <= 0xF4) {
        if (lead == 0xF0)
            *lo = 0x90;
        if (lead == 0xF4)
            *hi = 0x8F;
        return 3;
    }
    return 0;
}

/* Length of the character at s: >0 valid, -k an invalid maximal subsequence of k
 * bytes, 0 a valid but truncated prefix running to the end. */
static long char_len(const uint8_t *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    uint8_t lo, hi;
    int more = lead_info(s[0], &lo, &hi);
    if (!more)
        return -1;
    for (int i = 1; i <= more; i++) {
        if ((size_t)i >= n)
            return 0;
        if (s[i] < lo || s[i] > hi)
            return -i;
        lo = 0x80;
        hi = 0xBF;
    }
    return more + 1;
}

size_t cinfer_tok_utf8_valid_prefix(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs are the common case */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, u + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        long l = char_len(u + i, n - i);
        if (l <= 0)
            return i;
        i += (size_t)l;
    }
    return n;
}

size_t cinfer_tok_utf8_append_replacing(struct tok_buf *out, const char *s, size_t n, int hold_incomplete,
                                        int *nomem)
{
    static const char fffd[] = "\xEF\xBF\xBD";
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    *nomem = 0;
    while (i < n) {
        size_t ok = cinfer_tok_utf8_valid_prefix(s + i, n - i);
        if (ok && cinfer_tok_buf_append(out, s + i, ok) != CINFER_OK) {
            *nomem = 1;
            return i;
        }
        i += ok;
        if (i >= n)
            break;
        long l = char_len(u + i, n - i);
        if (l == 0) {
            if (hold_incomplete)
                return i;
            l = -(long)(n - i);
        }
        if (cinfer_tok_buf_append(out, fffd, 3) != CINFER_OK) {
            *nomem = 1;
            return i;
        }
        i += (size_t)(-l);
    }
    return n;
}

size_t cinfer_tok_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    const uint8_t *u = (const uint8_t *)s;
    if (u[0] < 0x80 || n < 2) {
        *cp = u[0];
        return 1;
    }
    if (u[0] < 0xE0) {
        *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
        return 2;
    }
    if (u[0] < 0xF0 || n < 4) {
        *cp = n < 3 ? 0xFFFD : ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        return n < 3 ? n : 3;
    }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
          ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    return 4;
}

size_t cinfer_tok_utf8_encode(uint32_t cp, char out[4])
{
    return (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)out);
}

/* bytes_to_unicode() of GPT-2's encoder.py: printable Latin-1 bytes stand for
 * themselves, the other 68 bytes take code points 256, 257, ... in byte order. */
static int printable_byte(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The alphabet as tables, built once (pthread_once keeps concurrent opens safe). */
static uint16_t byte_cp[256];
static int16_t cp_byte[324]; /* code points 0..323 cover the whole alphabet */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
    uint32_t next = 256;
    for (int i = 0; i < 324; i++)
        cp_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        byte_cp[b] = (uint16_t)(printable_byte(b) ? b : next++);
        cp_byte[byte_cp[b]] = (int16_t)b;
    }
}

uint32_t cinfer_tok_byte_to_cp(uint8_t b)
{
    pthread_once(&tables_once, build_tables);
    return byte_cp[b];
}

int cinfer_tok_cp_to_byte(uint32_t cp)
{
    pthread_once(&tables_once, build_tables);
    return cp < 324 ? cp_byte[cp] : -1;
}

int cinfer_tok_is_whitespace(uint32_t cp)
{
    return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

int cinfer_tok_is_alnum(uint32_t cp)
{
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

int cinfer_tok_is_numeric(uint32_t cp)
{
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO;
}
