// A whole C++ engine client of the gRPC feed (docs/engines.md): open a feed with an output request, stream N flat
// G-buffer frames in lockstep (each once the previous one came back styled), half-close, and say what came back.
// Built and run by tests/test_grpc_service.py where protoc, grpc_cpp_plugin and libgrpc++ are installed.
// usage: engine_feed_client HOST:PORT [TOKEN]
#include <grpcpp/grpcpp.h>
#include <cstdio>
#include <string>
#include <vector>
#include "gbuffer/feed/grpc/engine_feed.grpc.pb.h"

int main(int argc, char** argv) {
  std::string target = argv[1], token = argc > 2 ? argv[2] : "";
  const int W = 64, H = 32, N = 10;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  auto stub = alaya::engine::v1::EngineFeed::NewStub(channel);
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  auto stream = stub->Stream(&context);

  alaya::engine::v1::EngineMessage open;
  auto* o = open.mutable_open();
  o->set_name("cpp"); o->set_width(W); o->set_height(H); o->set_fps(30);
  o->mutable_output()->set_prompt("cyberpunk");
  stream->Write(open);
  alaya::engine::v1::StudioMessage reply;
  if (!stream->Read(&reply) || !reply.has_welcome()) { std::fprintf(stderr, "no welcome\n"); return 1; }
  std::printf("welcome session=%s %ux%u\n", reply.welcome().session_id().c_str(), reply.welcome().width(),
              reply.welcome().height());

  std::vector<unsigned char> plane(W * H * 3, 128);
  int received = 0;
  for (int tick = 0; tick < N; ++tick) {
    alaya::engine::v1::EngineMessage frame;
    auto* f = frame.mutable_frame();
    f->set_index(tick);
    auto* g = f->mutable_gbuffer();
    for (auto* field : {g->mutable_albedo(), g->mutable_depth(), g->mutable_metallic(), g->mutable_normal(),
                        g->mutable_roughness()})
      field->assign(reinterpret_cast<const char*>(plane.data()), plane.size());
    stream->Write(frame);
    while (stream->Read(&reply)) {           // lockstep: until this frame comes back styled
      if (reply.has_styled() && reply.styled().index() == static_cast<unsigned>(tick)) { ++received; break; }
    }
  }
  stream->WritesDone();
  while (stream->Read(&reply)) {}
  grpc::Status status = stream->Finish();
  std::printf("sent %d received %d status %d %s\n", N, received, status.error_code(), status.error_message().c_str());
  return received == N && status.ok() ? 0 : 1;
}
