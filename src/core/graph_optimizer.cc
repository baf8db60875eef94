#include "core/graph_optimizer.h"

namespace ortlite {

void optimize_graph(Model& model, int level) {
  (void)model;
  (void)level;
}

}  // namespace ortlite
