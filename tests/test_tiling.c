#include "common.h"
Test(placeholder_tiling, none) {}
