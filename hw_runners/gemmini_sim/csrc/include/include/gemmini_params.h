#include "../gemmini_params.h"
