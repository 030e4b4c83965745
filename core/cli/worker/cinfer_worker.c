/* cinfer-worker: the executable a launcher starts for a scheduler or detokenizer. */
#include "cinfer/engine.h"

int main(int argc, char **argv)
{
    return cinfer_worker_main(argc, argv, NULL);
}
