/* fuzz_mpi_launcher_input: what launch-mpi reads from outside (plugins/launch-mpi):
 *  - the group's settings blob rank 0 reads on its standard input (group_blob.c);
 *  - mpirun's standard error, scanned for the rank that ended a job (mpi_job_output.c);
 *  - Slurm's SLURM_JOB_NODELIST and a hostfile's text (mpi_allocation.c).
 * The first byte picks the reader, the rest is its input. Each accepts or refuses with
 * a message; nothing may crash, leak or read out of bounds, and what is accepted must
 * hold together (parts inside the blob, one name per node, each once). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launch-mpi/group_blob.h"
#include "launch-mpi/mpi_allocation.h"
#include "launch-mpi/mpi_job_output.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!names[i] || !names[i][0])
            abort();
        for (size_t j = 0; j < i; j++)
            if (!strcmp(names[i], names[j]))
                abort(); /* each node once */
    }
    cinfer_mpi_free_names(names, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t which = data[0] % 4;
    data++;
    size--;
    struct cinfer_error err = {0};
    if (which == 0) {
        uint32_t n;
        if (cinfer_mpi_group_blob_head(data, size, &n, &err) != CINFER_OK) {
            if (!err.message[0])
                abort();
            return 0;
        }
        const uint8_t **parts = calloc(n, sizeof *parts);
        size_t *sizes = calloc(n, sizeof *sizes);
        if (cinfer_mpi_group_blob_parse(data, size, n, parts, sizes, &err) == CINFER_OK) {
            size_t total = GROUP_BLOB_HEAD_BYTES;
            for (uint32_t i = 0; i < n; i++) {
                if (parts[i] < data || parts[i] + sizes[i] > data + size)
                    abort();
                total += 4 + sizes[i];
            }
            if (total != size)
                abort();
        } else if (!err.message[0]) {
            abort();
        }
        free(parts);
        free(sizes);
        return 0;
    }
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char **names = NULL;
    size_t n = 0;
    if (which == 1) {
        struct mpi_job_end end;
        cinfer_mpi_job_output_scan(text, &end);
        if (end.known && (end.rank < 0 || end.code < 0 || strlen(end.node) >= sizeof end.node))
            abort();
    } else if (which == 2) {
        if (cinfer_mpi_expand_slurm_nodelist(text, &names, &n, &err) == CINFER_OK)
            check_names(names, n);
        else if (!err.message[0])
            abort();
    } else {
        if (cinfer_mpi_parse_hostfile(text, "fuzz", &names, &n, &err) == CINFER_OK)
            check_names(names, n);
        else if (!err.message[0])
            abort();
    }
    free(text);
    return 0;
}
