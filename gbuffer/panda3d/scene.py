"""The drivable scene: Panda3D's bundled `models/environment` as the ground (a Bullet triangle mesh) and a car
(a Bullet raycast vehicle: a box chassis on four wheels), followed by a chase camera.

Units are metres; Panda's world axes: x right, y forward, z up. Materials carry the roughness and metallic the
G-buffer reads (the bundled models have textures but no materials).
"""

from __future__ import annotations

import math

import numpy as np

from gbuffer.engine.camera import perspective
from gbuffer.input import PlayerInput
from gbuffer.panda3d.display import panda3d_core

TICK_HZ = 60
ENVIRONMENT_SCALE = 0.25          # the model is about 1.2 km across; a quarter gives a 300 m valley
START = (-15.0, 35.0, 1.5)        # metres; an open meadow of the valley (no bamboo behind the camera)
MAX_STEER_DEG = 32.0
ENGINE_FORCE_N = 1600.0
BRAKE_FORCE_N = 60.0
REVERSE_BELOW_MS = 0.5            # a held brake slower than this reverses (unless it is the handbrake)
# (roughness, metallic, base colour) per part; the ground's colour comes from its textures
GROUND = (0.85, 0.0, (1.0, 1.0, 1.0, 1.0))
PAINT = (0.35, 0.8, (0.85, 0.12, 0.1, 1.0))
TYRES = (0.9, 0.0, (0.12, 0.12, 0.12, 1.0))
CHASSIS_HALF = (0.8, 1.6, 0.35)   # half extents, metres (x across, y along, z up)
# Stuck: driven (throttle, or a brake that reverses) yet slower than this for STUCK_S, or on its side or roof for
# STUCK_S: the car goes back to the start, as R does. Against a rock or in the bamboo the wheels spin at 0 m/s.
STUCK_BELOW_MS = 0.3
STUCK_S = 2.0
UPRIGHT_MIN = 0.5                 # the chassis' up axis' z below this: on its side or roof
# The chase camera: CAMERA_BEHIND_M behind and CAMERA_UP_M above the car, looking just ahead of it. Its arm from
# the car's roof to that place is a ray through the world; where it meets geometry (a rock, the bamboo, the
# valley wall) the camera comes in to CAMERA_CLEARANCE_M short of it, so it never sits inside anything.
CAMERA_BEHIND_M, CAMERA_UP_M = 7.0, 2.6
CAMERA_PIVOT_UP_M = 1.2           # the arm starts above the roof (the chassis box tops out at 0.65 m)
CAMERA_CLEARANCE_M = 0.4


def _material(core, roughness: float, metallic: float, base: tuple[float, ...]):
    m = core.Material()
    m.set_base_color(core.LColor(*base))
    m.set_roughness(roughness)
    m.set_metallic(metallic)
    return m


def _box(core, loader, half: tuple[float, float, float], look: tuple):
    """models/box (the unit cube from 0 to 1) centred and scaled to `half` extents."""
    holder = core.NodePath("box")
    box = core.NodePath(loader.load_sync(core.Filename("models/box")))
    box.reparent_to(holder)
    box.set_pos(-0.5, -0.5, -0.5)
    holder.set_scale(2 * half[0], 2 * half[1], 2 * half[2])
    holder.set_material(_material(core, *look), 1)
    return holder


class DrivingScene:
    """Scene graph + Bullet world. `step(control)` advances one physics tick; `follow()` moves the camera."""

    def __init__(self):
        core = panda3d_core()
        from panda3d import bullet

        self.core, self.bullet = core, bullet
        self.start_heading_deg = 0.0                           # reset()'s heading; a seeded route sets its own
        loader = core.Loader.get_global_ptr()
        self.root = core.NodePath("alaya-panda3d")
        self.world = bullet.BulletWorld()
        self.world.set_gravity(core.Vec3(0, 0, -9.81))

        environment = core.NodePath(loader.load_sync(core.Filename("models/environment")))
        environment.reparent_to(self.root)
        environment.set_scale(ENVIRONMENT_SCALE)
        environment.set_material(_material(core, *GROUND), 1)
        self.world.attach_rigid_body(self._ground_body(environment).node())

        self.chassis = self.root.attach_new_node(bullet.BulletRigidBodyNode("chassis"))
        self.chassis.node().add_shape(bullet.BulletBoxShape(core.Vec3(*CHASSIS_HALF)),
                                      core.TransformState.make_pos(core.Point3(0, 0, 0.3)))
        self.chassis.node().set_mass(800.0)
        self.chassis.node().set_deactivation_enabled(False)
        self.world.attach_rigid_body(self.chassis.node())
        body = _box(core, loader, CHASSIS_HALF, PAINT)
        body.reparent_to(self.chassis)
        body.set_z(0.3)                                        # where the collision box sits
        self.vehicle = bullet.BulletVehicle(self.world, self.chassis.node())
        self.vehicle.set_coordinate_system(bullet.ZUp)
        self.world.attach_vehicle(self.vehicle)
        for x, y, front in ((0.75, 1.1, True), (-0.75, 1.1, True), (0.75, -1.1, False), (-0.75, -1.1, False)):
            self._add_wheel(core, loader, core.Point3(x, y, 0.3), front)
        self.stuck_resets = 0                                  # resets the scene made itself (stuck or upside down)
        self.reset()

        self.camera = None                                     # set by attach_camera()

    def _ground_body(self, environment):
        """A static triangle mesh of every geometry in the environment, at its scale."""
        bullet = self.bullet
        mesh = bullet.BulletTriangleMesh()
        for path in environment.find_all_matches("**/+GeomNode"):
            transform = path.get_transform(self.root)
            for geom in path.node().get_geoms():
                mesh.add_geom(geom, True, transform)
        ground = self.root.attach_new_node(bullet.BulletRigidBodyNode("ground"))
        ground.node().add_shape(bullet.BulletTriangleMeshShape(mesh, dynamic=False))
        return ground

    def _add_wheel(self, core, loader, where, front: bool) -> None:
        visual = _box(core, loader, (0.15, 0.35, 0.35), TYRES)
        node = self.root.attach_new_node("wheel")
        visual.reparent_to(node)
        wheel = self.vehicle.create_wheel()
        wheel.set_node(node.node())
        wheel.set_chassis_connection_point_cs(where)
        wheel.set_front_wheel(front)
        wheel.set_wheel_direction_cs(core.Vec3(0, 0, -1))
        wheel.set_wheel_axle_cs(core.Vec3(1, 0, 0))
        wheel.set_wheel_radius(0.35)
        wheel.set_max_suspension_travel_cm(40.0)
        wheel.set_suspension_stiffness(40.0)
        wheel.set_wheels_damping_relaxation(2.3)
        wheel.set_wheels_damping_compression(4.4)
        wheel.set_friction_slip(2.0)
        wheel.set_roll_influence(0.1)

    def reset(self) -> None:
        """Back to the start, at rest, facing `start_heading_deg` (0 unless a seeded route set it)."""
        body = self.chassis.node()
        self.chassis.set_pos_hpr(*START, self.start_heading_deg, 0, 0)
        body.set_linear_velocity(self.core.Vec3(0, 0, 0))
        body.set_angular_velocity(self.core.Vec3(0, 0, 0))
        body.clear_forces()
        self._stuck_ticks = 0                                  # counted again from here
        self._cut = True                                       # the camera cuts to the car, not swoops across

    @property
    def speed_ms(self) -> float:
        """Forward speed, metres per second (negative when reversing)."""
        return self.vehicle.get_current_speed_km_hour() / 3.6

    @property
    def upright(self) -> bool:
        return self.chassis.get_quat(self.root).get_up().z >= UPRIGHT_MIN

    def _stuck(self, control: PlayerInput) -> bool:
        """Driven but not moving, or not on its wheels, for STUCK_S (counted per tick)."""
        driven = control.throttle > 0 or (control.brake > 0 and not control.handbrake)
        held = (driven and abs(self.speed_ms) < STUCK_BELOW_MS) or not self.upright
        self._stuck_ticks = self._stuck_ticks + 1 if held else 0
        return self._stuck_ticks >= STUCK_S * TICK_HZ

    def step(self, control: PlayerInput) -> None:
        """One tick with `control` (already clamped); a `reset`, a fall off the world or a car stuck for STUCK_S
        puts the car back first."""
        if self._stuck(control):
            self.stuck_resets += 1
            self.reset()
        elif control.reset or self.chassis.get_z() < -20:      # fell off the world: back to the start
            self.reset()
        angle = -control.steer * MAX_STEER_DEG                 # steer right (+) turns clockwise seen from above
        self.vehicle.set_steering_value(angle, 0)
        self.vehicle.set_steering_value(angle, 1)
        force = control.throttle * ENGINE_FORCE_N
        brake = control.brake * BRAKE_FORCE_N
        if control.brake > 0 and not control.handbrake and self.speed_ms < REVERSE_BELOW_MS and not control.throttle:
            force, brake = -0.5 * ENGINE_FORCE_N * control.brake, 0.0
        for i in (2, 3):
            self.vehicle.apply_engine_force(force, i)
        for i in range(4):
            self.vehicle.set_brake(brake, i)
        self.world.do_physics(1.0 / TICK_HZ, 1, 1.0 / TICK_HZ)

    def attach_camera(self, camera) -> None:
        self.camera = camera
        self.follow(snap=True)

    @property
    def _camera(self):
        """The camera attach_camera() gave (follow and view_projection need one)."""
        assert self.camera is not None, "attach_camera() first"
        return self.camera

    def follow(self, snap: bool = False) -> None:
        """Chase camera: behind and above the car, looking just ahead of it; it eases towards that place, then
        comes in along its arm wherever geometry stands between the car and it."""
        core, camera = self.core, self._camera
        car = self.chassis
        heading = math.radians(car.get_h())
        behind = core.Point3(car.get_x() + CAMERA_BEHIND_M * math.sin(heading),
                             car.get_y() - CAMERA_BEHIND_M * math.cos(heading), car.get_z() + CAMERA_UP_M)
        position = behind if snap or self._cut else camera.get_pos() + (behind - camera.get_pos()) * 0.25
        self._cut = False
        camera.set_pos(self._clear_of_geometry(car.get_pos() + core.Vec3(0, 0, CAMERA_PIVOT_UP_M), position))
        camera.look_at(car.get_pos() + core.Vec3(-2.0 * math.sin(heading), 2.0 * math.cos(heading), 0.8))

    def _clear_of_geometry(self, pivot, wanted):
        """`wanted`, or the point CAMERA_CLEARANCE_M short of the first geometry on the arm from `pivot` to it."""
        arm = wanted - pivot
        length = arm.length()
        if length <= CAMERA_CLEARANCE_M:
            return wanted
        hits = [h for h in self.world.ray_test_all(pivot, wanted).get_hits() if h.get_node() != self.chassis.node()]
        if not hits:
            return wanted
        nearest = min(h.get_hit_fraction() for h in hits)
        return pivot + arm * max(0.0, nearest - CAMERA_CLEARANCE_M / length)

    def view_projection(self, fov_y_deg: float, aspect: float) -> tuple:
        """(view, projection) of the camera in the conventions frames record (gbuffer/viewpoint.py): Panda's
        camera space (x right, y forward, z up; row vectors) turned into OpenGL's (x right, y up, looking -z)."""
        camera = self._camera
        lens = camera.node().get_lens()
        camera_to_world = np.array(camera.get_mat(self.root), np.float64).T     # column vectors
        panda_to_gl = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0], [0, 0, 0, 1]], np.float64)
        view = panda_to_gl @ np.linalg.inv(camera_to_world)
        return view, perspective(fov_y_deg, aspect, lens.get_near(), lens.get_far()).astype(np.float64)

    def state(self) -> dict:
        p = self.chassis.get_pos()
        return {"position": [round(p.x, 4), round(p.y, 4), round(p.z, 4)],
                "heading": round(math.radians(self.chassis.get_h()), 5), "speed": round(self.speed_ms, 4),
                "stuck_resets": self.stuck_resets}
