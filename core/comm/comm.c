/* core/comm/comm.c — what the core checks of any communicator before calling it, and
 * its destruction. */
#include <stddef.h>

#include "cinfer/communicator.h"

int cinfer_comm_check(const struct cinfer_comm *comm, struct cinfer_error *err)
{
    if (!comm || !comm->ops)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT, "communicator: none given (no ops)");
    const struct cinfer_comm_ops *ops = comm->ops;
    const char *name = ops->name ? ops->name : "(unnamed)";
    if (ops->version != CINFER_COMM_OPS_VERSION)
        return cinfer_error_set(err, CINFER_ERR_ABI, "communicator %s: ops version %u, this build expects %u", name,
                                ops->version, CINFER_COMM_OPS_VERSION);
    if (ops->struct_size < offsetof(struct cinfer_comm_ops, destroy) + sizeof ops->destroy)
        return cinfer_error_set(err, CINFER_ERR_ABI,
                                "communicator %s: ops struct_size %u is smaller than version %u's %zu bytes", name,
                                ops->struct_size, CINFER_COMM_OPS_VERSION, sizeof(struct cinfer_comm_ops));
    const struct {
        const char *slot;
        int set;
    } required[] = {
        {"all_reduce_sum_f32", ops->all_reduce_sum_f32 != NULL},
        {"all_gather", ops->all_gather != NULL},
        {"broadcast", ops->broadcast != NULL},
        {"barrier", ops->barrier != NULL},
        {"destroy", ops->destroy != NULL},
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!required[i].set)
            return cinfer_error_set(err, CINFER_ERR_ABI, "communicator %s: required op %s is NULL", name,
                                    required[i].slot);
    if (comm->size < 1 || comm->rank < 0 || comm->rank >= comm->size)
        return cinfer_error_set(err, CINFER_ERR_INVALID_ARGUMENT,
                                "communicator %s: rank %d of size %d; expected size >= 1 and 0 <= rank < size", name,
                                comm->rank, comm->size);
    return CINFER_OK;
}

void cinfer_comm_destroy(struct cinfer_comm **comm)
{
    if (!comm || !*comm)
        return;
    struct cinfer_comm *c = *comm;
    *comm = NULL;
    c->ops->destroy(c->state);
}
