#ifndef CINFER_ENGINE_DEFAULT_MODEL_H
#define CINFER_ENGINE_DEFAULT_MODEL_H

/* The folder of the model cinfer ships, used when no model path is given. */
const char *cinfer_default_model_path(void);

#endif
