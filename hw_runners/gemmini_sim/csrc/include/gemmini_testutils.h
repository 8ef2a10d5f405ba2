#include "gemmini.h"
